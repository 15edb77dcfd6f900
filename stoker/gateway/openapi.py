"""The OpenAPI 3.1 document published at `/openapi.json`, written by hand.

Small enough to keep next to the routes; a test checks that every route of the app is
documented here and nothing else is.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from stoker.gateway.images import MAX_IMAGES
from stoker.wire.blocks import IMAGE_TYPES

_ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    words = {
        400: "Bad input",
        401: "Missing or unknown bearer token",
        404: "No such session for this user (or no such approval waiting here)",
        409: "The stored session cannot be continued as configured (or the approval was "
        "already answered or expired)",
        413: "Body or message over the limit",
        415: "A body sent as anything but application/json (UTF-8)",
        502: "The provider failed or answered something that is not a response",
        503: "The database is unreachable or the replica is draining; see Retry-After",
        504: "The provider did not answer within the configured timeouts",
    }
    return {str(c): _json(_ERROR, words[c]) for c in codes}


def _op(summary: str, ok: dict[str, Any], *codes: int, **extra: Any) -> dict[str, Any]:
    """Every operation may answer 401 and, while its store is unreachable, 503."""
    return {"summary": summary, "responses": {**ok, **_errors(401, *codes, 503)}, **extra}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


_SID = [_path("sid")]
_IDEMPOTENCY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "A retry with the same key returns the stored reply without a new turn.",
    "schema": {"type": "string", "maxLength": 200},
}
_STREAM = {
    "name": "stream",
    "in": "query",
    "required": False,
    "description": "true/false (1/0, yes/no): stream Server-Sent Events. When absent, "
    "`Accept: text/event-stream` with q > 0 and no lower than JSON's streams.",
    "schema": {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no"]},
}
_LIMIT = {
    "name": "limit",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
}
_TOTALS_LIMIT = {
    **_LIMIT,
    "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
}
_OBJ = {"type": "object"}
_USAGE = {
    "type": "object",
    "properties": {
        k: {"type": "integer"}
        for k in ("uncached", "written_5m", "written_1h", "read", "output", "written")
    },
}
_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    "Usage": _USAGE,
    "Reply": {
        "type": "object",
        "properties": {
            "session_id": {"type": "string"},
            "kind": {"enum": ["answer", "command"]},
            "text": {"type": "string"},
            "exit": {"type": ["string", "null"]},
            "usage": {"$ref": "#/components/schemas/Usage"},
            "cost_usd": {"type": ["number", "null"]},
            "requests": {"type": "array", "items": _OBJ},
            "command": {"type": ["string", "null"]},
            "new_session_id": {"type": ["string", "null"]},
            "replayed": {"type": "boolean"},
            "notice": {"type": "string"},
        },
    },
}
_OPENAI_ERRORS = (400, 404, 413, 415, 502, 504)
_SESSION_HEADER = {"name": "X-Stoker-Session", "in": "header", "schema": {"type": "string"}}


def _openai_op(summary: str, answer: str) -> dict[str, Any]:
    """An OpenAI-compatible endpoint: the body is OpenAI's own (not described here), the
    session rides in a header, and it may fail as any turn may."""
    return _op(
        summary,
        {"200": _json(_OBJ, answer)},
        *_OPENAI_ERRORS,
        parameters=[_SESSION_HEADER, _IDEMPOTENCY],
        requestBody=_body(_OBJ),
    )


@cache
def openapi_document() -> dict[str, Any]:
    reply = _json({"$ref": "#/components/schemas/Reply"})
    sse: dict[str, Any] = {
        "description": "A turn as it happens (`Accept: text/event-stream` or `?stream=true`)"
        ": events text, tool, status, approval (a risky call waiting for "
        "POST .../approvals/{id}), then done (a Reply) or error",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
    image = {
        "type": "object",
        "required": ["media_type", "data"],
        "properties": {
            "media_type": {"enum": list(IMAGE_TYPES)},
            "data": {"type": "string", "contentEncoding": "base64"},
        },
    }
    message_body = {
        "type": "object",
        "required": ["text"],
        "properties": {
            "text": {"type": "string"},
            "images": {"type": "array", "items": image, "maxItems": MAX_IMAGES},
            "output": {
                "type": "object",
                "description": "A JSON schema: the answer's text is JSON valid against it",
            },
        },
    }
    create_body = {
        "type": "object",
        "properties": {"model": {"type": "string"}, "reasoning": {"type": "string"}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Stoker gateway", "version": "1"},
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/sessions": {
                "post": _op(
                    "Create a session",
                    {"201": _json(_OBJ, "Created: {id, model}")},
                    400,
                    413,
                    415,
                    requestBody={"content": {"application/json": {"schema": create_body}}},
                ),
                "get": _op(
                    "The caller's sessions, most recent first",
                    {"200": _json(_OBJ)},
                    400,
                    parameters=[_LIMIT],
                ),
            },
            "/v1/sessions/{sid}": {
                "get": _op("History, per turn", {"200": _json(_OBJ)}, 404, parameters=_SID),
                "delete": _op(
                    "Delete a session", {"204": {"description": "Deleted"}}, 404, parameters=_SID
                ),
            },
            "/v1/sessions/{sid}/usage": {
                "get": _op(
                    "Tokens, cost, and every provider call with its cache explanation",
                    {"200": _json(_OBJ)},
                    404,
                    parameters=_SID,
                )
            },
            "/v1/usage": {
                "get": _op(
                    "The caller's most recent sessions together: cost, no-cache cost, "
                    "savings, hit ratio, calls with no known price",
                    {"200": _json(_OBJ)},
                    400,
                    parameters=[_TOTALS_LIMIT],
                )
            },
            "/v1/sessions/{sid}/events": {
                "get": _op(
                    "The session's stored events after ?after= (or Last-Event-ID), from any "
                    "replica; as SSE (?stream=true) followed live for ?timeout= seconds",
                    {
                        "200": {
                            **_json(_OBJ, "{events: [{seq, type, created_at, data}]}"),
                            "content": {
                                **_json(_OBJ)["content"],
                                "text/event-stream": {"schema": {"type": "string"}},
                            },
                        }
                    },
                    400,
                    404,
                    parameters=[
                        *_SID,
                        *(
                            {"name": n, "in": "query", "schema": {"type": "integer"}}
                            for n in ("after", "limit", "timeout")
                        ),
                    ],
                )
            },
            "/v1/sessions/{sid}/messages": {
                "post": _op(
                    "Send a message (text starting with / is a command)",
                    {"200": {**reply, "content": {**reply["content"], **sse["content"]}}},
                    400,
                    404,
                    409,
                    413,
                    415,
                    502,
                    504,
                    parameters=[*_SID, _IDEMPOTENCY, _STREAM],
                    requestBody=_body(message_body),
                )
            },
            "/v1/sessions/{sid}/commands/{name}": {
                "post": _op(
                    "Run a command: new, reset, clear, model, reasoning, compress, usage, help",
                    {"200": reply},
                    400,
                    404,
                    415,
                    parameters=[
                        *_SID,
                        _path("name"),
                        _IDEMPOTENCY,
                    ],
                    requestBody={
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"argument": {"type": "string"}},
                                }
                            }
                        }
                    },
                )
            },
            "/v1/sessions/{sid}/approvals/{approval_id}": {
                "post": _op(
                    "Approve or deny a risky tool call the session's streamed message waits "
                    "on (the id comes in its `approval` event); the answer must reach the "
                    "replica that streams the message",
                    {"200": _json(_OBJ, "{id, approved, by, reason, at}")},
                    400,
                    404,
                    409,
                    413,
                    415,
                    parameters=[
                        *_SID,
                        _path("approval_id"),
                    ],
                    requestBody=_body(
                        {
                            "type": "object",
                            "required": ["decision"],
                            "properties": {
                                "decision": {"enum": ["approve", "deny"]},
                                "reason": {"type": "string", "maxLength": 1000},
                            },
                        }
                    ),
                )
            },
            "/v1/chat/completions": {
                "post": _openai_op(
                    "OpenAI-compatible chat; X-Stoker-Session or the resent history carries "
                    "the session; stop and max_tokens / max_completion_tokens cut the answer "
                    "the client receives, not the agent's model calls",
                    "chat.completion, or chat.completion.chunk SSE",
                )
            },
            "/v1/responses": {
                "post": _openai_op(
                    "OpenAI-compatible Responses API; X-Stoker-Session, previous_response_id "
                    "or the resent history carries the session; max_output_tokens cuts the "
                    "answer the client receives",
                    "response, or its SSE event sequence",
                )
            },
            "/v1/models": {"get": _op("The default model", {"200": _json(_OBJ)})},
            "/v1/models/{model}": {
                "get": _op(
                    "The default model, by its id (which may hold slashes); any other id is "
                    "OpenAI's 404 model_not_found",
                    {"200": _json(_OBJ)},
                    404,
                    parameters=[_path("model")],
                )
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "security": [],
                    "responses": {"200": _json(_OBJ)},
                }
            },
            "/healthz": {
                "get": {"summary": "Liveness", "security": [], "responses": {"200": _json(_OBJ)}}
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness: store reachable, schema current, not draining",
                    "security": [],
                    "responses": {"200": _json(_OBJ), **_errors(503)},
                }
            },
            "/ui": {
                "get": {
                    "summary": "The dashboard (the page asks for a token; data calls use it)",
                    "security": [],
                    "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
                }
            },
        },
    }
