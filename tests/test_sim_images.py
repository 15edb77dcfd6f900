"""Images in the simulator and in the model facts: counted by the provider's rule, refused
where a real API refuses them, and a model's `images` fact as each provider reports it."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest

from stoker.cache.models import model_info
from stoker.errors import InvalidRequest
from stoker.providers.openai import OpenAIProvider
from stoker.providers.sim.engine import SimEngine, check_images
from stoker.wire.blocks import MAX_IMAGE_BASE64
from stoker.wire.dialects import dialect_module
from tests.images import png

MODEL = "claude-sonnet-4-6"


def _payload(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "what is it?"}, *content]}
        ],
    }


def _image(data: str, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def test_an_image_counts_its_area_over_750() -> None:
    """Anthropic's rule (docs/provider-caching.md, "Token counts"), the size read from
    the PNG header: 200 x 150 / 750 = 40."""
    data = base64.b64encode(png(200, 150)).decode()
    plain = SimEngine().handle("anthropic", _payload(), at=0.0)
    seen = SimEngine().handle("anthropic", _payload(_image(data)), at=0.0)
    assert seen.usage.input_total - plain.usage.input_total == 40


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        (_image("Qk0=", "image/bmp"), "media_type 'image/bmp' is not one of image/jpeg"),
        (_image("A" * (MAX_IMAGE_BASE64 + 4)), "image exceeds 5 MB maximum"),
    ],
)
def test_the_simulator_refuses_the_images_the_api_refuses(
    block: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidRequest, match=r"messages\.0\.content\.1\.image: " + problem):
        SimEngine().handle("anthropic", _payload(block), at=0.0)


def test_an_image_to_a_model_that_reads_text_only_is_refused() -> None:
    payload = _payload(_image(base64.b64encode(png(4, 4)).decode()))
    request = dialect_module("anthropic").parse_request(payload)
    check_images(request, model_info(MODEL))  # the listed model takes images
    with pytest.raises(InvalidRequest, match="does not support image input"):
        check_images(request, replace(model_info(MODEL), images=False))


def test_a_model_takes_images_as_its_facts_say_and_an_unknown_self_hosted_one_does_not() -> None:
    assert model_info("claude-haiku-4-5").images
    assert model_info("gpt-4.1").images
    openai = OpenAIProvider(api_key="sk-test")
    assert openai.model_info("gpt-5").images
    assert openai.model_info("gpt-9-preview").images  # OpenAI's own new model: its default
    local = OpenAIProvider(api_key="sk-test", base_url="http://127.0.0.1:8000/v1")
    assert local.model_info("gpt-5").images  # a listed model, wherever it is served
    assert not local.model_info("qwen3-8b").images
