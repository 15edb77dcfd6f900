"""google-genai as a new user runs it against `stoker sim serve`: a default client (which
calls `v1`, with the colon before a method percent-encoded) and one told
`api_version="v1beta"`, on every route the simulator serves; and the same paths by hand,
with literal and encoded colons, where the OpenAI and Anthropic model list shares them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from google import genai
from google.genai import errors, types

from stoker.providers.sim.server import ServedSim, create_app, serve_in_background
from tests.provider_rigs import SYSTEM  # above Gemini 2.5 Flash's 1,024-token minimum

MODEL = "gemini-2.5-flash"
VERSIONS = [None, "v1beta"]  # None: the SDK's default, v1


@pytest.fixture(scope="module")
def server() -> Iterator[ServedSim]:
    with serve_in_background(create_app()) as running:
        yield running


def _client(server: ServedSim, version: str | None, key: str) -> genai.Client:
    options = types.HttpOptions(base_url=server.url)
    if version is not None:
        options = types.HttpOptions(base_url=server.url, api_version=version)
    return genai.Client(api_key=key, http_options=options)


@pytest.mark.parametrize("version", VERSIONS, ids=["default-v1", "v1beta"])
def test_every_route_answers_the_sdk_at_either_api_version(
    server: ServedSim, version: str | None
) -> None:
    client = _client(server, version, f"AIza-routes-{version}")
    answer = client.models.generate_content(model=MODEL, contents="Hello there")
    assert answer.text
    assert answer.usage_metadata is not None
    assert answer.usage_metadata.prompt_token_count
    streamed = client.models.generate_content_stream(model=MODEL, contents="Hello again")
    assert "".join(chunk.text or "" for chunk in streamed)
    counted = client.models.count_tokens(model=MODEL, contents="one two three")
    assert counted.total_tokens
    assert counted.total_tokens >= 3
    assert client.models.get(model=MODEL).name == f"models/{MODEL}"
    assert f"models/{MODEL}" in [m.name for m in client.models.list()]


@pytest.mark.parametrize("version", VERSIONS, ids=["default-v1", "v1beta"])
def test_an_explicit_cache_is_created_used_and_deleted_at_either_api_version(
    server: ServedSim, version: str | None
) -> None:
    client = _client(server, version, f"AIza-explicit-{version}")
    made = client.caches.create(
        model=MODEL,
        config=types.CreateCachedContentConfig(system_instruction=SYSTEM, ttl="600s"),
    )
    assert made.name
    assert made.usage_metadata
    assert made.usage_metadata.total_token_count
    held = made.usage_metadata.total_token_count
    assert client.caches.get(name=made.name).name == made.name
    assert [c.name for c in client.caches.list()] == [made.name]
    longer = client.caches.update(
        name=made.name, config=types.UpdateCachedContentConfig(ttl="1200s")
    )
    assert longer.expire_time
    assert made.expire_time
    assert longer.expire_time > made.expire_time
    answer = client.models.generate_content(
        model=MODEL,
        contents="What do you do?",
        config=types.GenerateContentConfig(cached_content=made.name),
    )
    assert answer.usage_metadata is not None
    assert answer.usage_metadata.cached_content_token_count == held
    client.caches.delete(name=made.name)
    assert list(client.caches.list()) == []
    with pytest.raises(errors.ClientError) as gone:
        client.caches.get(name=made.name)
    assert gone.value.code == 404


# A long document a user asks several questions about (about 5,900 tokens: above 2.5
# Pro's 4,096-token minimum), sent as most code does: one text part, document first.
DOCUMENT = "".join(
    f"Section {i}. The river town kept its ledgers in the old mill; clerk {i} wrote "
    "each barge, its cargo and its toll, and the council read them every spring. "
    for i in range(160)
)
QUESTIONS = ["Who kept the ledgers?", "What did clerk 7 write?", "When were they read?"]


@pytest.mark.parametrize("model", [MODEL, "gemini-2.5-pro"])
@pytest.mark.parametrize("version", VERSIONS, ids=["default-v1", "v1beta"])
def test_the_same_document_with_another_question_reads_the_document_implicitly(
    server: ServedSim, version: str | None, model: str
) -> None:
    client = _client(server, version, f"AIza-implicit-{version}-{model}")
    document = client.models.count_tokens(model=model, contents=DOCUMENT).total_tokens
    assert document is not None
    assert document > 5000
    read: list[int | None] = []
    for question in QUESTIONS:
        answer = client.models.generate_content(
            model=model, contents=f"{DOCUMENT}\n\nQuestion: {question}"
        )
        assert answer.usage_metadata is not None
        read.append(answer.usage_metadata.cached_content_token_count)
    assert read[0] is None  # the first call finds nothing (a zero count is left out)
    for later in read[1:]:  # every later call reads the document, to the 256-token grid
        assert later is not None
        assert document - 256 < later <= document


@pytest.mark.parametrize("version", ["v1", "v1beta"])
@pytest.mark.parametrize("colon", [":", "%3A", "%3a"])
def test_a_literal_or_encoded_colon_reaches_the_method(
    server: ServedSim, version: str, colon: str
) -> None:
    headers = {"x-goog-api-key": f"AIza-colon-{version}-{colon}"}
    body = {"contents": [{"role": "user", "parts": [{"text": "one two three"}]}]}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        counted = http.post(f"/{version}/models/{MODEL}{colon}countTokens", json=body)
        answered = http.post(f"/{version}/models/{MODEL}{colon}generateContent", json=body)
        unknown = http.post(f"/{version}/models/{MODEL}{colon}explode", json=body)
    assert counted.status_code == 200
    assert counted.json()["totalTokens"] >= 3
    assert answered.status_code == 200
    assert answered.json()["candidates"]
    assert unknown.status_code == 404
    assert unknown.json()["error"]["status"] == "NOT_FOUND"


def test_the_v1_model_list_is_geminis_for_a_google_key_and_stays_openais_otherwise(
    server: ServedSim,
) -> None:
    with httpx.Client(base_url=server.url) as http:
        google = http.get("/v1/models", headers={"x-goog-api-key": "AIza-list"}).json()
        by_query = http.get(f"/v1/models/{MODEL}", params={"key": "AIza-list"}).json()
        openai = http.get("/v1/models", headers={"authorization": "Bearer sk-list"}).json()
        one = http.get("/v1/models/gpt-4.1", headers={"authorization": "Bearer sk-list"})
    assert f"models/{MODEL}" in [m["name"] for m in google["models"]]
    assert by_query["name"] == f"models/{MODEL}"
    assert openai["object"] == "list"
    assert "models" not in openai
    assert one.json()["id"] == "gpt-4.1"


@pytest.mark.parametrize("token", ["x", "-1", "9" * 40])
def test_a_hostile_page_token_is_a_clear_400(server: ServedSim, token: str) -> None:
    with httpx.Client(base_url=server.url, headers={"x-goog-api-key": "AIza-page"}) as http:
        listed = http.get("/v1/cachedContents", params={"pageToken": token})
    assert listed.status_code == 400
    assert "pageToken" in listed.json()["error"]["message"]
