"""ACP `usage_update` after each model call of a run (issue 24), not once per run: the context the call used (its
turn's tokens) and the session's cost so far with a priced profile."""

from __future__ import annotations

import json

from tests.acp_client import acp_agent
from tests.harness.fake_openai import text
from tests.test_acp import make_repo, prompt_for, write
from tests.test_acp_sessions import APP, TWO_HUNKS

DONE = "<nagent-response>done</nagent-response>"


async def test_usage_update_after_each_model_call(workspace, isolated_home, model_env, fake_model) -> None:
    target = make_repo(workspace)
    assert target.read_text() == APP
    config = {
        "history": {"summarize": False},
        "models": {"priced": {"model": "fake-model", "price": {"input": 2.0, "output": 8.0}}},
        "model": "priced",
    }
    (isolated_home / ".nagent" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    fake_model.script(
        text("<nagent-next>now write it</nagent-next>", usage=(500, 20)),
        text(write("app.py", TWO_HUNKS), usage=(1000, 100)),
        text(DONE, usage=(2000, 50)),
    )
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "comment the returns"))
        assert answer.stop_reason == "end_turn"
        usage = client.of_kind("usage_update")
    # three calls, three updates as they happen (then the run's own, with its exact figures)
    assert [u.used for u in usage[:3]] == [520, 1100, 2050], usage
    costs = [u.cost.amount for u in usage]
    expected = [(500 * 2 + 20 * 8) / 1e6, (1500 * 2 + 120 * 8) / 1e6, (3500 * 2 + 170 * 8) / 1e6]
    assert all(abs(a - b) < 1e-9 for a, b in zip(costs[:3], expected, strict=True)), costs
    assert abs(costs[-1] - expected[-1]) < 1e-9 and all(u.size == 60000 for u in usage)
