"""python -m lifestack.serve on localhost: every endpoint, every bad input, the session
limit, idle expiry, episodes through the server equal to in-process ones (HTTP, the
WebSocket, OpenEnv's own client), and 64 concurrent sessions without cross-talk."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
ws_client = pytest.importorskip("websockets.sync.client")

from lifestack.client import LifeStackClient, RemoteEpisode, ServerError  # noqa: E402
from lifestack.episodes import Episode  # noqa: E402
from lifestack.policies import heuristic, mixed  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402
from lifestack.serve import serving  # noqa: E402
from lifestack.service import LifeStackService  # noqa: E402

BODY_LIMIT = 16_384
ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def reference(seed: int, difficulty: int, horizon: int = 5, domain: str | None = None) -> tuple[Episode, list[str]]:
    """An in-process episode and the answers played in it: heuristic, random valid, and garbage."""
    ep = Episode.from_scenario(sample_scenario(seed, difficulty, domain), horizon)
    act, answers = mixed(random.Random(seed), 0.15, 0.45, "no idea, sorry"), []
    while not ep.done:
        answer = act(ep.env)
        answers.append(answer)
        ep.step(answer)
    return ep, answers


def turn_tuple(t) -> tuple:
    return (t.prompt, t.completion, t.action, t.reward, t.breakdown, t.info, t.observation)


@pytest.fixture(scope="module")
def url():
    with serving(LifeStackService(max_sessions=200, idle_timeout=120, horizon=5), max_body_bytes=BODY_LIMIT) as u:
        yield u


@pytest.fixture
def client(url):
    with LifeStackClient(url) as c:
        yield c


def raw(url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
        chunked: bool = False) -> tuple[int, dict]:
    """A request as curl would send it; (status, JSON answer)."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


# -- endpoints ----------------------------------------------------------------------
def test_health_metadata_schema_and_capacity(client):
    assert client.health() == {"status": "healthy"}
    assert client.request("GET", "/metadata")["name"] == "lifestack"
    schema = client.schema()
    assert set(schema) == {"action", "observation", "reset_observation", "state"}
    assert "reward_components" in schema["observation"]["properties"]
    cap = client.request("GET", "/sessions")
    assert cap["max_sessions"] == 200 and cap["active_sessions"] >= 0


def test_curl_episode_reset_step_state_close(url):
    status, first = raw(url, "POST", "/reset", b'{"seed": 7, "difficulty": 2, "task_family": "code_merge_crisis"}')
    assert status == 200 and first["done"] is False and first["reward"] is None
    obs, sid = first["observation"], first["metadata"]["session_id"]
    ref = Episode.from_scenario(sample_scenario(7, 2, "code_merge_crisis"), 5)
    assert obs["text"] == ref.messages[-1]["content"] and obs["messages"] == ref.messages
    assert obs["episode"]["domain"] == "code_merge_crisis" and obs["episode"]["seed"] == 7

    answer = heuristic(ref.env)
    turn = ref.step(answer)
    status, step = raw(url, "POST", "/step", json.dumps({"action": {"text": answer}, "session_id": sid}).encode())
    assert status == 200
    assert (step["observation"]["text"], step["reward"], step["observation"]["reward_components"],
            step["observation"]["info"], step["observation"]["action"]) == \
        (turn.observation, turn.reward, turn.breakdown, turn.info, turn.action)
    # raw model text as the action itself, and the session id in the query string
    answer2 = heuristic(ref.env)
    turn2 = ref.step(answer2)
    status, step2 = raw(url, "POST", f"/step?session_id={sid}", json.dumps({"action": answer2}).encode())
    assert status == 200 and step2["reward"] == turn2.reward and step2["observation"]["text"] == turn2.observation

    status, state = raw(url, "GET", f"/state?session_id={sid}")
    assert status == 200 and state["step_count"] == 2 and state["messages"] == ref.messages
    assert state["episode_id"] == sid and state["outcome"] == ref.outcome()
    assert raw(url, "DELETE", f"/sessions/{sid}")[0] == 200
    assert raw(url, "GET", f"/state?session_id={sid}")[0] == 404


def test_a_structured_action_plays_as_its_json_text(client):
    ref = Episode.from_scenario(sample_scenario(3, 1), 5)
    action = json.loads(heuristic(ref.env))
    turn = ref.step(json.dumps(action))
    client.reset(seed=3, difficulty=1, horizon=5)
    got = client.step({**action, "metadata": {}})  # OpenEnv's Action base adds "metadata"
    assert got.reward == turn.reward and got.text == turn.observation and got.observation["action"] == turn.action


def test_full_episodes_through_the_server_equal_in_process_ones(url):
    for seed in range(6):
        difficulty, domain = 1 + seed % 5, (None, "flight_crisis", "code_merge_crisis")[seed % 3]
        ref, answers = reference(seed, difficulty, 5, domain)
        with RemoteEpisode(url, seed=seed, difficulty=difficulty, domain=domain, horizon=5) as remote:
            for answer in answers:
                assert not remote.done
                remote.step(answer)
            assert remote.done
            assert [turn_tuple(t) for t in remote.turns] == [turn_tuple(t) for t in ref.turns]
            assert remote.messages == ref.messages and remote.outcome() == ref.outcome()
            assert remote.record() == ref.record()
            with pytest.raises(RuntimeError, match="over"):
                remote.step("{}")


# -- bad input ----------------------------------------------------------------------
def test_bad_requests_get_clear_4xx_and_leave_other_sessions_intact(url):
    ref, answers = reference(21, 4)
    bystander = RemoteEpisode(url, seed=21, difficulty=4, horizon=5)
    bystander.step(answers[0])

    status, first = raw(url, "POST", "/reset", b'{"seed": 1, "difficulty": 1, "horizon": 1}')
    done_sid = first["metadata"]["session_id"]
    assert raw(url, "POST", "/step", json.dumps({"action": "{}", "session_id": done_sid}).encode())[0] == 200
    cases = [
        ("POST", "/reset", b"{not json", 400, "INVALID_JSON"),
        ("POST", "/step", b'{"action": "x", "session_id": ', 400, "INVALID_JSON"),
        ("POST", "/step", b"\xff\xfe garbage", 400, "INVALID_JSON"),
        ("POST", "/step", b"[1, 2]", 422, "VALIDATION_ERROR"),
        ("POST", "/step", b'{"session_id": "abc"}', 422, "VALIDATION_ERROR"),
        ("POST", "/step", b'{"action": 42, "session_id": "abc"}', 422, "VALIDATION_ERROR"),
        ("POST", "/step", b'{"action": "x"}', 422, "VALIDATION_ERROR"),
        ("POST", "/step", b'{"action": "x", "session_id": "no-such-session"}', 404, "UNKNOWN_SESSION"),
        ("GET", "/state?session_id=no-such-session", None, 404, "UNKNOWN_SESSION"),
        ("DELETE", "/sessions/no-such-session", None, 404, "UNKNOWN_SESSION"),
        ("POST", "/step", json.dumps({"action": "{}", "session_id": done_sid}).encode(), 409, "EPISODE_OVER"),
        ("POST", "/reset", b'{"seed": -3}', 422, "VALIDATION_ERROR"),
        ("POST", "/reset", b'{"seed": "seven"}', 422, "VALIDATION_ERROR"),
        ("POST", "/reset", b'{"seed": 1e400}', 422, "VALIDATION_ERROR"),
        ("POST", "/reset", b'{"seed": 99999999999999999999999}', 422, "VALIDATION_ERROR"),
        ("POST", "/reset", b'{"seed": 1, "difficulty": 9}', 422, "VALIDATION_ERROR"),
        ("POST", "/reset", b'{"seed": 1, "task_family": "space_opera"}', 422, "VALIDATION_ERROR"),
        ("POST", "/reset", b"x" * (BODY_LIMIT + 1), 413, "BODY_TOO_LARGE"),
        ("GET", "/no/such/path", None, 404, "NOT_FOUND"),
    ]
    for method, path, body, want_status, want_code in cases:
        status, answer = raw(url, method, path, body)
        assert (status, answer.get("code")) == (want_status, want_code), (path, body, answer)
        assert isinstance(answer.get("detail"), str) and answer["detail"], answer

    # a huge chunked body (no Content-Length) is cut off while it streams in
    chunks = (b'{"action": "' + b"a" * 4096 for _ in range(10))
    status, answer = raw(url, "POST", "/step", chunks, {"Content-Type": "application/json"}, chunked=True)
    assert status == 413 and answer["code"] == "BODY_TOO_LARGE"

    for answer in answers[1:]:  # the bystander's episode went on as if nothing happened
        bystander.step(answer)
    assert [turn_tuple(t) for t in bystander.turns] == [turn_tuple(t) for t in ref.turns]
    assert raw(url, "GET", "/health") == (200, {"status": "healthy"})


def test_the_session_limit_refuses_new_sessions_clearly_until_one_closes():
    with serving(LifeStackService(max_sessions=3, idle_timeout=60)) as url:
        clients = [LifeStackClient(url) for _ in range(3)]
        for i, c in enumerate(clients):
            c.reset(seed=i, difficulty=1)
        with pytest.raises(ServerError) as e:
            LifeStackClient(url).reset(seed=9, difficulty=1)
        assert e.value.status == 503 and e.value.code == "CAPACITY_REACHED" and "limit" in e.value.message
        assert e.value.body["max_sessions"] == 3
        with ws_client.connect(url.replace("http", "ws") + "/ws") as ws:  # a WebSocket counts too
            refusal = json.loads(ws.recv(timeout=5))
        assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"
        clients[0].close()
        again = LifeStackClient(url)
        assert again.reset(seed=9, difficulty=1).observation["episode"]["seed"] == 9
        clients[1].step("{}")  # the others were never disturbed


def test_idle_sessions_expire():
    with serving(LifeStackService(max_sessions=2, idle_timeout=0.3)) as url:
        c = LifeStackClient(url)
        c.reset(seed=1, difficulty=1)
        busy = LifeStackClient(url)
        busy.reset(seed=2, difficulty=1)
        deadline = time.monotonic() + 5
        while c.request("GET", "/sessions")["active_sessions"] > 1 and time.monotonic() < deadline:
            busy.state()  # in use: never expires
            time.sleep(0.05)
        assert c.request("GET", "/sessions")["active_sessions"] == 1  # the reaper dropped the idle one
        with pytest.raises(ServerError) as e:
            c.step("{}")
        assert e.value.status == 404 and "expired" in e.value.message
        busy.step("{}")


# -- the WebSocket --------------------------------------------------------------------
def test_websocket_session_plays_the_in_process_episode_and_answers_errors(url):
    ref, answers = reference(5, 3)
    with ws_client.connect(url.replace("http", "ws") + "/ws") as ws:
        def send(msg):
            ws.send(msg if isinstance(msg, str) else json.dumps(msg))
            return json.loads(ws.recv(timeout=10))

        assert send({"type": "step", "data": {"text": "{}"}})["data"]["code"] == "NOT_RESET"
        assert send("{broken")["data"]["code"] == "INVALID_JSON"
        assert send({"type": "jump"})["data"]["code"] == "UNKNOWN_TYPE"
        assert send({"type": "reset", "data": {"seed": -1}})["data"]["code"] == "VALIDATION_ERROR"
        first = send({"type": "reset", "data": {"seed": 5, "difficulty": 3, "horizon": 5}})
        assert first["type"] == "observation" and first["data"]["observation"]["messages"] == ref.messages[:2]
        for i, (answer, turn) in enumerate(zip(answers, ref.turns)):
            data = {"text": answer} if i % 2 else {"action": answer}  # both data forms
            got = send({"type": "step", "data": data})["data"]
            assert (got["observation"]["text"], got["reward"], got["observation"]["reward_components"]) == \
                (turn.observation, turn.reward, turn.breakdown)
        assert got["done"] is True
        assert send({"type": "step", "data": {"text": "{}"}})["data"]["code"] == "EPISODE_OVER"
        state = send({"type": "state"})
        assert state["type"] == "state" and state["data"]["step_count"] == len(ref.turns)
        ws.send(json.dumps({"type": "close"}))
        with pytest.raises(Exception):
            ws.recv(timeout=5)  # the server closed the session


def test_an_oversized_websocket_message_closes_only_that_connection(url):
    with ws_client.connect(url.replace("http", "ws") + "/ws", max_size=None) as ws:
        ws.send(json.dumps({"type": "step", "data": {"text": "a" * (2 * BODY_LIMIT)}}))
        with pytest.raises(Exception):
            ws.recv(timeout=5)
        assert ws.close_code == 1009  # "message too big"
    assert raw(url, "GET", "/health")[0] == 200


# -- many sessions at once -------------------------------------------------------------
def test_64_concurrent_sessions_each_equal_their_in_process_run(url):
    n = 64
    refs = [reference(1000 + i, 1 + i % 5, 5) for i in range(n)]
    results: list = [None] * n
    start = threading.Barrier(n)

    def play(i: int) -> None:
        try:
            ref, answers = refs[i]
            start.wait(timeout=30)
            remote = RemoteEpisode(url, seed=1000 + i, difficulty=1 + i % 5, horizon=5)
            for answer in answers:
                remote.step(answer)
            results[i] = remote
        except BaseException as e:  # reported below, per session
            results[i] = e

    threads = [threading.Thread(target=play, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i, ((ref, _), remote) in enumerate(zip(refs, results)):
        assert isinstance(remote, RemoteEpisode), f"session {i}: {remote!r}"
        assert [turn_tuple(t) for t in remote.turns] == [turn_tuple(t) for t in ref.turns], f"session {i}"
        assert remote.outcome() == ref.outcome()


# -- OpenEnv's contract, checked with the pinned openenv package ------------------------
def test_results_validate_against_openenv_models(client):
    types = pytest.importorskip("openenv.core.env_server.types")
    types.HealthResponse.model_validate(client.health())
    types.SchemaResponse.model_validate(client.schema())
    types.EnvironmentMetadata.model_validate(client.request("GET", "/metadata"))
    types.ServerCapacityStatus.model_validate({k: v for k, v in client.request("GET", "/sessions").items()
                                               if k not in ("idle_timeout_s", "max_sessions_per_client")})
    types.ResetRequest.model_validate({"seed": 4, "difficulty": 2, "task_family": "flight_crisis"})
    first = client.request("POST", "/reset", {"seed": 4, "difficulty": 2})
    types.ResetResponse.model_validate(first)
    body = {"action": {"text": "{}"}, "session_id": first["metadata"]["session_id"]}
    types.StepRequest.model_validate(body)
    types.StepResponse.model_validate(client.request("POST", "/step", body))
    types.State.model_validate(client.request("GET", f"/state?session_id={first['metadata']['session_id']}"))


def test_openenv_generic_client_plays_the_in_process_episode(url):
    generic = pytest.importorskip("openenv.core.generic_client")
    ref, answers = reference(8, 2)
    env = generic.GenericEnvClient(base_url=url).sync()
    try:
        first = env.reset(seed=8, difficulty=2, horizon=5)
        assert first.observation["messages"] == ref.messages[:2] and first.done is False
        for answer, turn in zip(answers, ref.turns):
            result = env.step({"text": answer})
            assert (result.observation["text"], result.reward, result.observation["reward_components"]) == \
                (turn.observation, turn.reward, turn.breakdown)
        assert result.done is True
        assert env.state()["step_count"] == len(ref.turns)
    finally:
        env.close()


def test_the_manifest_parses_with_openenv_and_names_an_app_that_serves():
    parser = pytest.importorskip("openenv.validation.parsers.openenv_yaml")
    import importlib
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    manifest = parser.OpenEnvYamlParser().parse(root)
    assert manifest.name == "lifestack" and manifest.reward.range == (-1.0, 1.0)
    raw_manifest = yaml.safe_load((root / "openenv.yaml").read_text())
    module, attr = raw_manifest["app"].split(":")
    assert type(getattr(importlib.import_module(module), attr)).__name__ == "FastAPI"
    dockerfile = (root / "Dockerfile").read_text()
    assert '".[serve]"' in dockerfile and f'"--port", "{raw_manifest["port"]}"' in dockerfile


@pytest.mark.parametrize("clients", [4, 70])  # 70: more than the server's default per-client quota (64)
def test_bench_script_runs_and_reports_the_ratio(clients):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, str(root / "scripts" / "bench_serve.py"), "--clients", str(clients), "--episodes",
                          "1", "--repeats", "1", "--horizon", "3"], capture_output=True, text=True, timeout=120, cwd=root)
    assert out.returncode == 0, out.stderr
    assert "median: server" in out.stdout and "server/in-process = " in out.stdout


# -- hostile answers (issue #28) -----------------------------------------------------------

def test_the_worst_answer_under_the_body_limit_is_answered_with_bounded_work(monkeypatch):
    """Service calls run on the event loop, so an answer that made the parser re-read
    itself would stall every client. Each worst answer under the body limit is answered
    (200), the JSON scan reads at most a fixed multiple of its length (counted, not
    timed: a clock fails under load), and health checks sent meanwhile are all answered."""
    import lifestack.actions as A
    from decoder_reads import count_decoder_reads

    counter = count_decoder_reads(monkeypatch)
    limit = 1 << 20
    with serving(LifeStackService(max_sessions=8, idle_timeout=60, horizon=5), max_body_bytes=limit) as u:
        def step(text: str) -> dict:
            sid = raw(u, "POST", "/reset", b'{"seed": 3, "difficulty": 3, "horizon": 5}')[1]["metadata"]["session_id"]
            status, answer = raw(u, "POST", "/step", json.dumps({"action": text, "session_id": sid}).encode())
            assert status == 200, answer
            return answer

        pad = limit - 200
        units = {"open tags": "<SYSTEM_METADATA>", "nested": '{"a":', "braces": "{"}
        worst = {name: unit * (pad // len(json.dumps(unit)[1:-1])) for name, unit in units.items()}  # as sent
        health: list[int] = []

        def poll():
            for _ in range(5):
                health.append(raw(u, "GET", "/health")[0])

        for name, text in worst.items():
            poller = threading.Thread(target=poll)
            poller.start()
            counter.read = 0
            answer = step(text)
            poller.join()
            assert answer["reward"] <= 0, name
            # the text is cut to MAX_TEXT_CHARS, then scanned at most twice (as sent, repaired)
            assert counter.read <= 2 * (A.MAX_SCAN_FACTOR + 1) * A.MAX_TEXT_CHARS, (name, counter.read)
        assert health == [200] * 15, health


def test_a_deeply_nested_websocket_action_is_a_4xx_never_a_500(url):
    with ws_client.connect(url.replace("http", "ws") + "/ws") as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 5, "difficulty": 3, "horizon": 5}}))
        json.loads(ws.recv(timeout=10))
        for depth in [*range(850, 1100), 2000, 5000]:  # where json.dumps's recursion ends depends on the stack
            ws.send('{"type":"step","data":{"x":' + "[" * depth + "]" * depth + "}}")
            got = json.loads(ws.recv(timeout=10))
            if got["type"] == "error":
                assert 400 <= got["data"].get("status", 400) < 500 and got["data"]["code"] != "EXECUTION_ERROR", got
    status, answer = raw(url, "POST", "/reset", b'{"seed": 1, "difficulty": 1, "horizon": 2}')
    sid = answer["metadata"]["session_id"]
    body = b'{"action": {"x": ' + b"[" * 3000 + b"]" * 3000 + b'}, "session_id": "' + sid.encode() + b'"}'
    status, answer = raw(url, "POST", "/step", body)
    assert 400 <= status < 500, (status, answer)


def test_a_server_gone_mid_episode_is_the_clients_own_error():
    from lifestack.client import ConnectionLost

    with serving(LifeStackService(max_sessions=4, idle_timeout=60, horizon=5)) as u:
        ep = RemoteEpisode(u, seed=3, difficulty=2, horizon=5)
    with pytest.raises(ServerError) as err:  # the server is gone (a restart looks the same)
        ep.step("{}")
    assert isinstance(err.value, ConnectionLost) and err.value.code == "CONNECTION_LOST"


# -- timeouts, a token, fair shares (issue #28) ---------------------------------------------
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402


def _open(url: str, source: str = "127.0.0.1") -> socket.socket:
    u = urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=10, source_address=(source, 0))
    return s


def _read_all(s: socket.socket, limit: float = 10.0) -> bytes:
    s.settimeout(limit)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    except socket.timeout:
        return out + b"<still open>"


@pytest.mark.parametrize("partial", [b"POST /reset HT", b"POST /reset HTTP/1.1\r\nHost: x\r\n", b""])
def test_half_sent_request_heads_are_timed_out(partial):
    with serving(LifeStackService(max_sessions=4, idle_timeout=60), header_timeout=0.5) as u:
        s = _open(u)
        s.sendall(partial)
        answer = _read_all(s)  # the server's 0.5 s limit answers long before the reader's 10 s
        assert b"<still open>" not in answer
        assert answer.startswith(b"HTTP/1.1 408") and b'"REQUEST_TIMEOUT"' in answer
        assert raw(u, "GET", "/health")[0] == 200


def test_half_sent_bodies_and_idle_keep_alive_are_timed_out():
    with serving(LifeStackService(max_sessions=4, idle_timeout=60), body_timeout=0.5, keep_alive=0.5) as u:
        s = _open(u)
        s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"se")
        answer = _read_all(s)
        assert answer.startswith(b"HTTP/1.1 408") and b'"REQUEST_TIMEOUT"' in answer
        s = _open(u)  # a complete request, then silence: the keep-alive connection is closed
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _read_all(s)  # closed by the server's 0.5 s keep-alive, not the reader's 10 s
        assert answer.startswith(b"HTTP/1.1 200") and b"<still open>" not in answer


def test_a_client_idle_past_the_servers_keep_alive_reconnects_instead_of_losing_its_request():
    from lifestack.client import REUSE_IDLE_S
    from lifestack.serve import DEFAULT_KEEP_ALIVE

    assert REUSE_IDLE_S < DEFAULT_KEEP_ALIVE  # the default client reopens before the default server closes
    with serving(LifeStackService(max_sessions=4, idle_timeout=60), keep_alive=0.5) as u:
        c = LifeStackClient(u, reuse_idle_s=0.2)  # below this server's keep-alive
        c.reset(seed=3, difficulty=1)
        time.sleep(1.0)  # idle past the keep-alive: the server has closed the connection
        assert c.state()["session_id"] == c.session_id  # (with a 30 s window: ConnectionLost)


def test_malformed_http_gets_the_json_error_shape():
    with serving(LifeStackService(max_sessions=4, idle_timeout=60)) as u:
        for head in (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                     b"POST /reset HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                     b"GARBAGE\r\n\r\n"):
            s = _open(u)
            s.sendall(head)
            answer = _read_all(s)
            assert answer.startswith(b"HTTP/1.1 400"), answer[:80]
            body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
            assert body["code"] == "INVALID_HTTP" and body["detail"]


def test_sigterm_exits_within_seconds_with_half_sent_requests_open(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lifestack.serve", "--port", str(port), "--shutdown-timeout", "1"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if raw(url, "GET", "/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        open_ones = [_open(url) for _ in range(3)]
        open_ones[0].sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"seed\"")
        open_ones[1].sendall(b"POST /reset HTTP/1.1\r\nHost: x")
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) is not None  # exits, half-sent requests and all (a hang times out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_token_guards_every_endpoint_but_health():
    with serving(LifeStackService(max_sessions=4, idle_timeout=60), token="s3cret") as u:
        assert raw(u, "GET", "/health")[0] == 200
        status, answer = raw(u, "POST", "/reset", b'{"seed": 1}')
        assert (status, answer["code"]) == (401, "UNAUTHORIZED")
        assert raw(u, "POST", "/reset", b'{"seed": 1}', {"Authorization": "Bearer nope"})[0] == 401
        assert raw(u, "GET", "/sessions", None, {"Authorization": "Bearer s3cret"})[0] == 200
        with LifeStackClient(u, token="s3cret") as c:
            assert c.reset(seed=1, difficulty=1).session_id
        with pytest.raises(Exception):
            with ws_client.connect(u.replace("http", "ws") + "/ws"):
                pass
        with ws_client.connect(u.replace("http", "ws") + "/ws", additional_headers={"Authorization": "Bearer s3cret"}) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"


def test_one_client_cannot_take_every_session():
    service = LifeStackService(max_sessions=8, idle_timeout=600, max_sessions_per_client=3)
    with serving(service) as u:
        greedy = LifeStackClient(u, source_address=("127.0.0.2", 0))
        for _ in range(3):
            greedy.request("POST", "/reset", {"seed": 1})
        with pytest.raises(ServerError) as err:
            greedy.request("POST", "/reset", {"seed": 1})
        assert (err.value.status, err.value.code) == (503, "TOO_MANY_SESSIONS") and "share" in err.value.message
        other = LifeStackClient(u, source_address=("127.0.0.3", 0))
        assert other.request("POST", "/reset", {"seed": 2})["metadata"]["session_id"]
        assert service.capacity()["max_sessions_per_client"] == 3


def test_openenv_plain_http_shape_reset_then_step_without_a_session_id():
    with serving(LifeStackService(max_sessions=8, idle_timeout=600)) as u:
        c = LifeStackClient(u, source_address=("127.0.0.4", 0))
        with pytest.raises(ServerError) as err:  # nothing to play yet: a message it can act on
            c.request("POST", "/step", {"action": "{}"})
        assert err.value.code == "VALIDATION_ERROR" and "/reset first" in err.value.message
        c.request("POST", "/reset", {"seed": 5, "difficulty": 2})
        assert c.request("POST", "/step", {"action": "{}"})["observation"] is not None
        c.request("POST", "/reset", {"seed": 6, "difficulty": 2})
        with pytest.raises(ServerError) as err:  # two sessions: which one is ambiguous
            c.request("POST", "/step", {"action": "{}"})
        assert "2 open sessions" in err.value.message


def test_many_half_open_connections_are_all_released():
    with serving(LifeStackService(max_sessions=4, idle_timeout=60), header_timeout=0.5) as u:
        held = [_open(u) for _ in range(100)]
        for i, s in enumerate(held):
            s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"GET /hea")
        time.sleep(1.5)
        closed = 0
        for s in held:
            s.settimeout(2.0)
            try:
                data = s.recv(65536)
                closed += data.startswith(b"HTTP/1.1 408") or data == b""
            except OSError:
                closed += 1
            s.close()
        assert closed == len(held)
        assert raw(u, "GET", "/health")[0] == 200


def test_session_ids_never_reach_the_access_log():
    import logging

    from lifestack.serve import MaskSessionIds

    sid = "0123456789abcdef0123456789abcdef"
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", f"/state?session_id={sid}", "1.1", 200), None)
    assert MaskSessionIds().filter(record)
    assert sid not in record.getMessage() and "<session>" in record.getMessage()


def test_the_app_itself_bounds_a_websocket_message_and_masks_the_access_log(monkeypatch):
    """``uvicorn lifestack.serve:app`` gives uvicorn none of ``python -m lifestack.serve``'s
    settings (its WebSocket limit stays 16 MiB, its access log on): the app's own limit
    closes an oversized message (1009) and the access log still masks session ids."""
    import logging
    import socket
    import uvicorn

    import lifestack.serve as S

    access = logging.getLogger("uvicorn.access")
    monkeypatch.setattr(access, "filters", [])
    monkeypatch.delitem(S.__dict__, "app", raising=False)
    assert S.app is S.app  # built on first use
    assert any(isinstance(f, S.MaskSessionIds) for f in access.filters)
    small = S.create_app(LifeStackService(max_sessions=4, idle_timeout=30, horizon=3), max_body_bytes=2000)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(small, log_level="warning"))  # uvicorn's defaults, as its CLI
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(3000):  # a bound for a broken start only: a busy machine may take seconds
            if server.started:
                break
            time.sleep(0.01)
        assert server.started
        ws_url = f"ws://127.0.0.1:{sock.getsockname()[1]}/ws"
        with ws_client.connect(ws_url, max_size=None) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 7, "difficulty": 2}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"
            ws.send(json.dumps({"type": "step", "data": {"text": "é" * 1500}}))  # 1,500 characters, 3,000+ bytes
            with pytest.raises(Exception):
                ws.recv(timeout=10)
            assert ws.close_code == 1009
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
