"""Stoker: an agent runtime whose request prefix stays byte-stable, so the prompt cache stays warm.

The names below are the public API; everything else is reachable through its module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from stoker.agent.agent import Agent
from stoker.agent.compaction import CompactionPolicy
from stoker.agent.delegate import DelegateConfig, delegate_tool
from stoker.agent.integrations import Integrations
from stoker.agent.keepwarm import SpendLimits
from stoker.agent.loop import TurnResult
from stoker.agent.review import ReviewConfig
from stoker.agent.seams import Callbacks
from stoker.agent.session import Session
from stoker.agent.starts import INHERIT, Rebase
from stoker.agent.stream import (
    ApprovalRequested,
    CallRecorded,
    OutputDelta,
    StatusChanged,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnDone,
    TurnEvent,
    TurnStream,
    UnansweredApproval,
)
from stoker.agent.telemetry_setup import telemetry_from
from stoker.cache.explain import explain
from stoker.cache.planner import CachePolicy
from stoker.clock import Clock, FrozenClock, SystemClock, Timer
from stoker.config import Config, TelemetrySettings
from stoker.errors import (
    AmbiguousSessionId,
    AuthenticationError,
    CompactionError,
    ConcurrentWrite,
    ConfigError,
    DatabaseNotFound,
    InvalidRequest,
    MissingExtra,
    MissingTools,
    OutputError,
    PortInUse,
    PrefixError,
    ProviderError,
    ProviderTimeout,
    ResumeMismatch,
    SessionNotFound,
    SpawnDepthExceeded,
    StokerError,
    StoreError,
    StoreUnavailable,
    ToolError,
    ToolUnavailable,
    UnknownPrice,
    WireError,
)
from stoker.integrations.errors import (
    IntegrationError,
    IntegrationTimeout,
    ToolCallFailed,
    ToolkitUnavailable,
    UnknownToolkit,
)
from stoker.memory.errors import (
    AmbiguousEntry,
    BudgetExceeded,
    EntryNotFound,
    InvalidEntry,
    InvalidSkill,
    MemoryStoreError,
    SkillExists,
    SkillNotFound,
)
from stoker.providers.base import CallContext, Completion, Provider
from stoker.providers.retry import RetryableError
from stoker.providers.sim.model import RuleModel, ScriptedModel
from stoker.providers.sim.provider import SimProvider
from stoker.providers.sim.schema_values import UnsatisfiableSchema
from stoker.store import SessionStore, open_store
from stoker.tools import (
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    DispatchPolicy,
    Tool,
    ToolContext,
    ToolDocWarning,
    ToolRegistry,
    Toolset,
    tool,
)
from stoker.tools._schema import ArgumentError
from stoker.wire.blocks import (
    DocumentBlock,
    ImageBlock,
    ImageRefBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_from_dict,
    block_to_dict,
    image_type,
    valid_text,
)
from stoker.wire.messages import AssistantMessage, UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import Breakpoint, CacheObject, Request
from stoker.wire.usage import Usage

# Optional parts load on first use: the provider SDKs and the gateway's web stack take a
# second to import. Type checkers see them as plain imports (the block below mirrors
# `_LAZY`, and tests/test_exports.py keeps the two equal); the interpreter never runs it.
if TYPE_CHECKING:
    from stoker.agent.otel import OtelTelemetry
    from stoker.gateway.errors import (
        ApprovalNotFound,
        BadRequest,
        Conflict,
        GatewayError,
        InvalidParam,
        NotFound,
        PayloadTooLarge,
        ToolsRemoved,
        Unauthorized,
        Unavailable,
        UnsupportedMediaType,
        UpstreamError,
        UpstreamTimeout,
    )
    from stoker.gateway.openai_errors import ModelNotFound
    from stoker.platforms.base import AttachmentRefused
    from stoker.providers.anthropic import AnthropicProvider
    from stoker.providers.bedrock import BedrockProvider
    from stoker.providers.compat import DeepSeekProvider, LocalProvider, OpenRouterProvider
    from stoker.providers.google import GoogleProvider
    from stoker.providers.openai import OpenAIProvider
    from stoker.providers.select import select_provider
    from stoker.proxy.in_process import http_client

_LAZY = {
    "AnthropicProvider": "stoker.providers.anthropic",
    "OtelTelemetry": "stoker.agent.otel",  # needs the `otel` extra
    "OpenAIProvider": "stoker.providers.openai",
    "BedrockProvider": "stoker.providers.bedrock",  # needs the `bedrock` extra
    "DeepSeekProvider": "stoker.providers.compat",
    "LocalProvider": "stoker.providers.compat",
    "OpenRouterProvider": "stoker.providers.compat",
    "GoogleProvider": "stoker.providers.google",  # needs the `google` extra
    "select_provider": "stoker.providers.select",
    "http_client": "stoker.proxy.in_process",  # the proxy's work inside an SDK's client
    "ApprovalNotFound": "stoker.gateway.errors",
    "AttachmentRefused": "stoker.platforms.base",
    "BadRequest": "stoker.gateway.errors",
    "Conflict": "stoker.gateway.errors",
    "GatewayError": "stoker.gateway.errors",
    "InvalidParam": "stoker.gateway.errors",
    "ModelNotFound": "stoker.gateway.openai_errors",
    "NotFound": "stoker.gateway.errors",
    "PayloadTooLarge": "stoker.gateway.errors",
    "ToolsRemoved": "stoker.gateway.errors",
    "Unauthorized": "stoker.gateway.errors",
    "Unavailable": "stoker.gateway.errors",
    "UnsupportedMediaType": "stoker.gateway.errors",
    "UpstreamError": "stoker.gateway.errors",
    "UpstreamTimeout": "stoker.gateway.errors",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stoker' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "INHERIT",
    "Agent",
    "AmbiguousEntry",
    "AmbiguousSessionId",
    "AnthropicProvider",
    "ApprovalDecision",
    "ApprovalNotFound",
    "ApprovalRequest",
    "ApprovalRequested",
    "Approver",
    "ArgumentError",
    "AssistantMessage",
    "AttachmentRefused",
    "AuthenticationError",
    "BadRequest",
    "BedrockProvider",
    "Breakpoint",
    "BudgetExceeded",
    "CacheObject",
    "CacheParams",
    "CachePolicy",
    "CacheRecord",
    "CallContext",
    "CallRecorded",
    "Callbacks",
    "Clock",
    "CompactionError",
    "CompactionPolicy",
    "Completion",
    "ConcurrentWrite",
    "Config",
    "ConfigError",
    "Conflict",
    "DatabaseNotFound",
    "DeepSeekProvider",
    "DelegateConfig",
    "DispatchPolicy",
    "DocumentBlock",
    "EntryNotFound",
    "Explanation",
    "FrozenClock",
    "GatewayError",
    "GoogleProvider",
    "ImageBlock",
    "ImageRefBlock",
    "IntegrationError",
    "IntegrationTimeout",
    "Integrations",
    "InvalidEntry",
    "InvalidParam",
    "InvalidRequest",
    "InvalidSkill",
    "LocalProvider",
    "MemoryStoreError",
    "MissingExtra",
    "MissingTools",
    "ModelNotFound",
    "NotFound",
    "OpenAIProvider",
    "OpenRouterProvider",
    "OtelTelemetry",
    "OutputDelta",
    "OutputError",
    "PayloadTooLarge",
    "PortInUse",
    "Prefix",
    "PrefixError",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "Rebase",
    "RedactedThinkingBlock",
    "Request",
    "ResumeMismatch",
    "RetryableError",
    "ReviewConfig",
    "RuleModel",
    "ScriptedModel",
    "Session",
    "SessionNotFound",
    "SessionStore",
    "SimProvider",
    "SkillExists",
    "SkillNotFound",
    "SpawnDepthExceeded",
    "SpendLimits",
    "StatusChanged",
    "StokerError",
    "StoreError",
    "StoreUnavailable",
    "SystemClock",
    "TelemetrySettings",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "Timer",
    "Tool",
    "ToolCallFailed",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolDocWarning",
    "ToolError",
    "ToolRegistry",
    "ToolResultBlock",
    "ToolUnavailable",
    "ToolUseBlock",
    "ToolkitUnavailable",
    "ToolsRemoved",
    "Toolset",
    "TurnDone",
    "TurnEvent",
    "TurnResult",
    "TurnStream",
    "UnansweredApproval",
    "Unauthorized",
    "Unavailable",
    "UnknownPrice",
    "UnknownToolkit",
    "UnsatisfiableSchema",
    "UnsupportedMediaType",
    "UpstreamError",
    "UpstreamTimeout",
    "Usage",
    "UserMessage",
    "WireError",
    "block_from_dict",
    "block_to_dict",
    "delegate_tool",
    "explain",
    "http_client",
    "image_type",
    "open_store",
    "select_provider",
    "telemetry_from",
    "tool",
    "valid_text",
]
