"""A client for ``python -m lifestack.serve``, and the reference for its HTTP contract.

:class:`LifeStackClient` has the in-process environment's verbs (``reset``, ``step``,
``state``) over HTTP; :class:`RemoteEpisode` has :class:`lifestack.episodes.Episode`'s
interface (``messages``, ``step(completion) -> Turn``, ``done``, ``turns``,
``outcome()``, ``record()``), so a trainer can play an episode on a server where it
played one in-process, and get the same turns.

Standard library only (http.client, json): the core install can use it without the
``serve`` extra. One client holds one keep-alive connection and is not thread-safe:
give each thread its own.
"""

from __future__ import annotations

import http.client
import json
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from .episodes import Turn
from .prompts import prompt_text

# A connection unused this long is reopened before a request: the server closes idle
# keep-alive connections (``--keep-alive``, 5 s by default), and a request sent on a
# connection it has closed is lost (ConnectionLost, never retried). Keep it below the
# server's keep-alive; a client of a server run with a shorter one passes ``reuse_idle_s``.
REUSE_IDLE_S = 2.0


class ServerError(RuntimeError):
    """The server refused a request: ``status`` (HTTP), ``code`` (e.g. ``UNKNOWN_SESSION``)."""

    def __init__(self, status: int, code: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body


class ConnectionLost(ServerError):
    """The connection broke before an answer came (the server restarted, a proxy cut it,
    ...): ``status`` 0, ``code`` ``CONNECTION_LOST``. Never retried: a step may have been
    played before the connection broke, so the session's state is unknown."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "CONNECTION_LOST", message)


@dataclass
class StepResult:
    """One result, as OpenEnv's clients see it."""

    observation: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any]

    @property
    def text(self) -> str | None:
        return self.observation.get("text")

    @property
    def session_id(self) -> str:
        return self.metadata["session_id"]


class LifeStackClient:
    """Talks to one server. ``reset`` starts a session and remembers its id; ``step`` and
    ``state`` use it. ``close`` ends the session on the server (idle ones expire anyway)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", timeout: float = 30.0, token: str | None = None,
                 source_address: tuple[str, int] | None = None, reuse_idle_s: float = REUSE_IDLE_S) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port], got {base_url!r}")
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
        # the server's bearer token: given, or LIFESTACK_SERVE_TOKEN as the server reads it
        self.token = token if token is not None else (os.environ.get("LIFESTACK_SERVE_TOKEN") or None)
        self.source_address = source_address
        self.reuse_idle_s = reuse_idle_s
        self._url, self._prefix = url, url.path.rstrip("/")
        self._conn: http.client.HTTPConnection | None = None
        self._last_used = 0.0
        self.session_id: str | None = None

    # -- transport ------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is not None and time.monotonic() - self._last_used > self.reuse_idle_s:
            self._drop()
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._url.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._url.hostname, self._url.port, timeout=self.timeout, source_address=self.source_address)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, payload: Any = None, *, body: bytes | None = None) -> Any:
        """One request; the decoded JSON answer, or ServerError. ``body`` sends raw bytes
        (for tests of the server's error handling)."""
        if body is None and payload is not None:
            body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = self._connection()
        try:
            conn.request(method, self._prefix + path, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop()  # never retried: a step may have been played before the connection broke
            hint = (" The request may or may not have been played: GET /state tells where the session stands "
                    "(404 if the server restarted); reset to start over.") if method != "GET" else " Safe to retry."
            raise ConnectionLost(f"{method} {path} to {self.base_url}: {type(exc).__name__}: {exc}.{hint}") from exc
        self._last_used = time.monotonic()
        if resp.will_close:
            self._drop()
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = {"detail": raw.decode("utf-8", "replace")[:500]}
        if resp.status >= 400:
            d = data if isinstance(data, dict) else {}
            raise ServerError(resp.status, str(d.get("code", "HTTP_ERROR")), str(d.get("detail", data)), data)
        return data

    # -- the environment's verbs ----------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health")

    def schema(self) -> dict[str, Any]:
        return self.request("GET", "/schema")

    def reset(self, seed: int | None = None, difficulty: int | None = None, task_family: str | None = None,
              horizon: int | None = None, **extra: Any) -> StepResult:
        """Start an episode in a new session (the previous one of this client is closed)."""
        payload = {k: v for k, v in {"seed": seed, "difficulty": difficulty, "task_family": task_family,
                                     "horizon": horizon, **extra}.items() if v is not None}
        if self.session_id is not None:
            self.close()
        result = _result(self.request("POST", "/reset", payload))
        self.session_id = result.session_id
        return result

    def step(self, action: str | dict[str, Any]) -> StepResult:
        """Play one answer: the model's raw text, or an action object."""
        if isinstance(action, str):
            action = {"text": action}
        return _result(self.request("POST", "/step", {"action": action, "session_id": self._session()}))

    def state(self) -> dict[str, Any]:
        return self.request("GET", f"/state?session_id={quote(self._session())}")

    def close(self) -> None:
        """End the session on the server; a session already gone (expired) is fine."""
        sid, self.session_id = self.session_id, None
        if sid is not None:
            try:
                self.request("DELETE", f"/sessions/{quote(sid)}")
            except ServerError as e:
                if e.status != 404:
                    raise
        self._drop()

    def _session(self) -> str:
        if self.session_id is None:
            raise RuntimeError("no session: call reset() first")
        return self.session_id

    def __enter__(self) -> LifeStackClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _result(data: dict[str, Any]) -> StepResult:
    return StepResult(data["observation"], data.get("reward"), bool(data["done"]), data.get("metadata") or {})


class RemoteEpisode:
    """An :class:`~lifestack.episodes.Episode` played on a server.

    ``RemoteEpisode(base_url, seed, difficulty, domain=None, horizon=8)`` starts the
    episode that ``Episode.from_scenario(sample_scenario(seed, difficulty, domain),
    horizon)`` starts in-process (a prompt's metadata holds its seed, difficulty and
    domain), and plays the same way: ``messages`` (system + user, then assistant / user
    per turn), ``step(completion) -> Turn``, ``done``, ``turns``, ``outcome()``,
    ``record()``. Same answers, same turns, byte for byte.

    ``RemoteEpisode(base_url, scenario=meta, horizon=h)`` starts instead at exactly the
    state a prompt's ``<SYSTEM_METADATA>`` object ``meta`` describes, as
    ``Episode.from_prompt`` does in-process: the trainer's way (a prompt drawn with
    ``sample_scenario(seed, difficulty)`` is not the one ``sample_scenario(seed,
    difficulty, domain)`` draws: naming the family changes the draw).

    The server session is closed when the episode ends (or by ``close()``, or ``with``).
    """

    def __init__(self, base_url: str, seed: int | None = None, difficulty: int | None = None, domain: str | None = None,
                 horizon: int = 8, *, scenario: dict[str, Any] | None = None, timeout: float = 30.0,
                 client: LifeStackClient | None = None) -> None:
        self.client = client or LifeStackClient(base_url, timeout=timeout)
        if scenario is not None:  # exactly the state a prompt's metadata describes
            first = self.client.reset(horizon=horizon, scenario=scenario)
        else:
            first = self.client.reset(seed=seed, difficulty=difficulty, task_family=domain, horizon=horizon)
        info = first.observation["episode"]
        self.seed, self.difficulty, self.horizon = info["seed"], info["difficulty"], info["horizon"]
        self.domain, self.conflict_id = info["domain"], info["conflict_id"]
        self.messages: list[dict[str, str]] = [dict(m) for m in first.observation["messages"]]
        self.turns: list[Turn] = []
        self._done, self._outcome = first.done, first.observation["outcome"]
        if self._done:
            self.client.close()

    @property
    def done(self) -> bool:
        return self._done

    def step(self, completion: str) -> Turn:
        """Play one answer; append it and the environment's reply to the conversation."""
        if self._done:
            raise RuntimeError("the episode is over")
        prompt = prompt_text(self.messages)
        r = self.client.step(completion)
        obs = r.observation
        turn = Turn(prompt, completion, obs["action"], r.reward, obs["reward_components"], list(obs["info"]),
                    obs["text"])
        self.turns.append(turn)
        self.messages.append({"role": "assistant", "content": completion})
        if obs["text"] is not None:
            self.messages.append({"role": "user", "content": obs["text"]})
        self._done, self._outcome = r.done, obs["outcome"]
        if self._done:
            self.client.close()
        return turn

    def outcome(self) -> dict[str, Any]:
        return self._outcome

    def record(self) -> dict[str, Any]:
        """What a log keeps of the episode: the same dict as ``Episode.record()``."""
        return {"seed": self.seed, "difficulty": self.difficulty, "domain": self.domain,
                "conflict_id": self.conflict_id, "horizon": self.horizon,
                "turns": [t.to_dict() for t in self.turns], "outcome": self.outcome()}

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RemoteEpisode:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
