"""The recording gateway and the loopback token server: token ids and log-probs of every completion kept."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from datadojo.env.tokens import GenOutput, openai_completions_generate
from datadojo.testing.server import Reply, ScriptedLLMServer
from datadojo.testing.token_server import TokenServer
from datadojo.train.gateway import RecordingGateway


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


async def test_completions_through_the_gateway_are_recorded_token_exact(tmp_path):
    seen: list[list[int]] = []

    def handler(prompt: list[int], sampling: dict[str, Any]) -> GenOutput:
        seen.append(prompt)
        return GenOutput([prompt[-1] + 1, 7, 7], [-0.1, -0.2, -0.3], "completed")

    log = tmp_path / "completions.jsonl"
    with TokenServer(handler) as srv, RecordingGateway(srv.base_url + "/v1", log) as gw:
        gen = openai_completions_generate(gw.base_url, "toy")
        out = await gen([3, 4, 5], {"temperature": 1.0, "max_tokens": 3})
        assert out.token_ids == [6, 7, 7] and out.log_probs == [-0.1, -0.2, -0.3]
        # The gateway asked the engine for token ids even though the client did not.
        sent = srv.calls[-1][1]
        assert sent["return_token_ids"] is True and sent["logprobs"] == 1
    rec = [json.loads(line) for line in log.read_text().splitlines()]
    assert rec == [
        {
            "path": "/completions",
            "request_id": "cmpl-toy",
            "prompt_token_ids": None,
            "finish_reason": "stop",
            "text": "",
            "prompt": [3, 4, 5],
            "token_ids": [6, 7, 7],
            "logprobs": [-0.1, -0.2, -0.3],
        }
    ]
    assert seen == [[3, 4, 5]]


def test_chat_completions_keep_ids_from_token_id_logprobs(tmp_path):
    # A chat client that asked for nothing: the gateway adds logprobs; vLLM's return_tokens_as_token_ids
    # writes each token as "token_id:N", which is what the gateway records as ids.
    reply = Reply("hi!", logprobs=(("token_id:11", -0.5, ()), ("token_id:12", -1.25, ())))
    log = tmp_path / "c.jsonl"
    with ScriptedLLMServer([reply, "no logprobs here"]) as up, RecordingGateway(up.base_url, log) as gw:
        body = {"model": "fake", "messages": [{"role": "user", "content": "hello"}]}
        data = _post(gw.base_url + "/chat/completions", body)
        assert data["choices"][0]["message"]["content"] == "hi!"
        assert up.requests[0].json["logprobs"] is True
        _post(gw.base_url + "/chat/completions", body)
        assert gw.unexact == 1  # scripted tokens without ids: recorded, flagged not exact
    rec = [json.loads(line) for line in log.read_text().splitlines()]
    assert rec[0]["token_ids"] == [11, 12] and rec[0]["logprobs"] == [-0.5, -1.25]
    assert rec[0]["messages"] == body["messages"]
    assert rec[1]["token_ids"] is None
