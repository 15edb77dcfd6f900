"""`stoker sim serve`: the simulator over HTTP for the official SDKs and any other client."""

from __future__ import annotations

import click

from stoker.cli.options import command_group
from stoker.cli.render import console
from stoker.extras import require
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import ScriptedModel

DEFAULT_PORT = 8788

sim_app = command_group(
    "sim",
    "The simulator over HTTP: real cache accounting, offline.\n\n"
    "Any client or SDK can point at it; no key or network is needed.",
)


@sim_app.command("serve")
@click.option("--host", default="127.0.0.1", help="Interface to listen on.")
@click.option("--port", default=DEFAULT_PORT, help="Port to listen on.")
@click.option("--model-script", help="A JSON list of steps the model plays, in order.")
def serve_command(host: str, port: int, model_script: str | None) -> None:
    """Serve the providers' APIs on the simulator.

    Anthropic Messages, OpenAI Chat Completions and Responses, Bedrock, OpenRouter,
    DeepSeek, vLLM, llama.cpp and Gemini, each with real cache accounting."""
    require("server", "stoker sim serve")
    from stoker.providers.sim.server import serve  # starlette and uvicorn load only here

    engine = SimEngine(model=ScriptedModel.from_file(model_script)) if model_script else None

    def up(url: str) -> None:  # only once the port is ours and it answers
        console.print(
            f"Stoker simulator on {url} (any API key; cache totals at {url}/stats)\n"
            f"  ANTHROPIC_BASE_URL={url}\n  OPENAI_BASE_URL={url}/v1\n"
            f"  AWS_ENDPOINT_URL_BEDROCK_RUNTIME={url}\n"
            f"  OPENROUTER_BASE_URL={url}/openrouter/api/v1\n  DEEPSEEK_BASE_URL={url}/deepseek\n"
            f"  vLLM: {url}/vllm/v1   llama.cpp: {url}/llamacpp/v1\n"
            f"  GOOGLE_GEMINI_BASE_URL={url}",
            soft_wrap=True,
        )

    serve(engine, host=host, port=port, started=up)
