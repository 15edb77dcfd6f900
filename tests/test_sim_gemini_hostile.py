"""No body makes the simulator's Gemini API answer a 5xx: a rich, valid request (tools, a
tool loop with a thought signature, an inline image, structured output, a named cache)
broken the ways a client breaks it, on generateContent, its stream, countTokens and
cachedContents. Every answer is a 2xx or a 4xx in Google's error shape."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from stoker.clock import FrozenClock
from stoker.providers.sim.server import create_app
from tests.sim_bodies import broken

PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}
TOOLS = [{"functionDeclarations": [{"name": "read_file", "parametersJsonSchema": SCHEMA}]}]
CONTENTS = [
    {
        "role": "user",
        "parts": [
            {"text": "read_file app.py " * 700},
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
        ],
    },
    {
        "role": "model",
        "parts": [
            {
                "functionCall": {"id": "c1", "name": "read_file", "args": {"path": "a"}},
                "thoughtSignature": "c2ln",
            }
        ],
    },
    {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "1"}}}
        ],
    },
]
GENERATE = {
    "systemInstruction": {"parts": [{"text": "You read files."}]},
    "tools": TOOLS,
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "generationConfig": {
        "maxOutputTokens": 64,
        "stopSequences": ["END"],
        "temperature": 1.0,
        "thinkingConfig": {"thinkingBudget": 128, "includeThoughts": True},
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
    },
    "contents": CONTENTS,
}
CACHE = {
    "model": "models/gemini-2.5-flash",
    "displayName": "stoker/agent/s",
    "systemInstruction": {"parts": [{"text": "You read files."}]},
    "tools": TOOLS,
    "contents": CONTENTS[:1],
    "ttl": "600s",
}
MODEL = "/v1beta/models/gemini-2.5-flash"
WIRES = {
    f"{MODEL}:generateContent": GENERATE,
    f"{MODEL}:streamGenerateContent?alt=sse": GENERATE,
    f"{MODEL}:countTokens": {"contents": CONTENTS},
    "/v1beta/cachedContents": CACHE,
}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(clock=FrozenClock()), raise_server_exceptions=True) as c:
        yield c


def _check(client: TestClient, path: str, content: bytes, key: str) -> None:
    headers = {"x-goog-api-key": key, "content-type": "application/json"}
    with client.stream("POST", path, content=content, headers=headers) as answer:
        body = answer.read()
    assert answer.status_code < 500, body[:500]
    if answer.status_code >= 400:
        error = json.loads(body)["error"]
        assert error["code"] == answer.status_code
        assert isinstance(error["message"], str)
        assert error["message"]
        assert isinstance(error["status"], str)


@pytest.mark.parametrize("path", list(WIRES))
def test_no_body_makes_the_gemini_api_fail(client: TestClient, path: str) -> None:
    key = f"AIza-{uuid.uuid4().hex}"

    @settings(
        max_examples=120,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(content=broken(WIRES[path], ("replace", "remove")))
    def one(content: bytes) -> None:
        _check(client, path, content, key)

    one()


def test_the_valid_bodies_are_answered_and_a_named_cache_too(client: TestClient) -> None:
    headers = {"x-goog-api-key": "AIza-valid"}
    for path, good in WIRES.items():
        answer = client.post(path, json=good, headers=headers)
        assert answer.status_code == 200, (path, answer.text[:300])
    made = client.post("/v1beta/cachedContents", json=CACHE, headers=headers).json()
    named = {
        "cachedContent": made["name"],
        "contents": CONTENTS[1:],
        "generationConfig": {"maxOutputTokens": 16},
    }
    answer = client.post(f"{MODEL}:generateContent", json=named, headers=headers)
    assert answer.status_code == 200, answer.text[:300]
    assert (
        answer.json()["usageMetadata"]["cachedContentTokenCount"]
        == made["usageMetadata"]["totalTokenCount"]
    )
    listed = client.get("/v1beta/cachedContents", headers=headers).json()
    assert made["name"] in [c["name"] for c in listed["cachedContents"]]
    patched = client.patch(f"/v1beta/{made['name']}", json={"ttl": "60s"}, headers=headers)
    assert patched.status_code == 200
    assert client.delete(f"/v1beta/{made['name']}", headers=headers).json() == {}
    gone = client.get(f"/v1beta/{made['name']}", headers=headers)
    assert gone.status_code == 404
    assert gone.json()["error"]["status"] == "NOT_FOUND"


def test_keys_are_asked_for_as_google_asks() -> None:
    with TestClient(create_app(api_keys=["good"])) as strict:
        assert strict.post(f"{MODEL}:generateContent", json=GENERATE).status_code == 403
        refused = strict.post(
            f"{MODEL}:generateContent", json=GENERATE, headers={"x-goog-api-key": "bad"}
        )
        assert refused.status_code == 400
        assert refused.json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"
        by_query = strict.post(f"{MODEL}:generateContent?key=good", json=GENERATE)
        assert by_query.status_code == 200


V1 = "/v1/models/gemini-2.5-flash%3A"  # the SDK's default: v1, the colon percent-encoded


@pytest.mark.parametrize("method", ["generateContent", "countTokens"])
def test_no_body_makes_the_v1_api_with_an_encoded_colon_fail(
    client: TestClient, method: str
) -> None:
    key = f"AIza-{uuid.uuid4().hex}"
    wire = GENERATE if method == "generateContent" else {"contents": CONTENTS}

    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(content=broken(wire, ("replace", "remove")))
    def one(content: bytes) -> None:
        _check(client, V1 + method, content, key)

    one()


def test_no_query_or_path_makes_the_cache_list_or_a_model_fail(client: TestClient) -> None:
    headers = {"x-goog-api-key": f"AIza-{uuid.uuid4().hex}"}

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(
        version=st.sampled_from(["v1", "v1beta"]),
        field=st.sampled_from(["pageSize", "pageToken"]),
        value=st.text(max_size=30),
        model=st.text(max_size=30),
    )
    def one(version: str, field: str, value: str, model: str) -> None:
        listed = client.get(f"/{version}/cachedContents", params={field: value}, headers=headers)
        assert listed.status_code < 500, listed.text[:300]
        got = client.get(f"/{version}/models/{quote(model)}", headers=headers)
        assert got.status_code < 500, got.text[:300]
        if got.status_code >= 400 and got.headers["content-type"].startswith("application/json"):
            assert got.json()["error"]["status"]  # (a path no route takes is a plain 404)

    one()
