"""The environment as a service, without the network: sessions and the wire format.

A session holds one :class:`lifestack.episodes.Episode`, so what a remote caller sees
(the observation text, the reward and its components) is byte for byte what the
trainer's prompts hold in-process. This module owns the parts a transport must not
decide on its own: which requests are valid (seed, difficulty, task family, horizon,
the action), how many sessions may live at once, when an idle one expires, and the
JSON shapes of results. ``lifestack.serve`` maps it onto HTTP and WebSocket;
``lifestack.client`` reads its results back. Standard library only.

The shapes follow OpenEnv's HTTP contract (``openenv`` 0.10.0,
``openenv.core.env_server.types``): a result is ``{"observation": {...}, "reward": float
| None, "done": bool, "metadata": {...}}``, a reset request is ``{"seed": N, ...}``, a
step request is ``{"action": {...}}``, the state carries ``episode_id`` and
``step_count``. docs/serve.md lists every field.

Thread-safe: the store has one lock for its table and one per session, so two requests
for one session run one after the other and never interleave inside an episode, while
different sessions never wait on each other's episode.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from .episodes import MAX_HORIZON, Episode, Turn
from .generator import DOMAINS, MAX_DIFFICULTY, MIN_DIFFICULTY
from .scenarios import sample_scenario

MAX_SEED = 2**63 - 1  # JSON integers beyond this lose precision in many clients
DEFAULT_DIFFICULTY = 1
DEFAULT_HORIZON = MAX_HORIZON  # no task lasts longer, so the task decides the end
RESET_FIELDS = {"seed", "difficulty", "task_family", "domain", "horizon", "episode_id", "session_id", "scenario"}
# OpenEnv's StepRequest fields besides "action": accepted and ignored (a step is fast and cannot time out).
STEP_EXTRA_FIELDS = {"session_id", "timeout_s", "request_id"}
# Key OpenEnv's Action base class adds to every action; not part of a LifeStack answer.
ACTION_METADATA_KEY = "metadata"
ENV_NAME = "lifestack"


class ServiceError(Exception):
    """A request the service refuses: an HTTP status, a stable code, a message for people."""

    status = 400
    code = "BAD_REQUEST"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def to_dict(self) -> dict[str, Any]:
        return {"detail": self.message, "code": self.code, **self.extra}


class InvalidJSON(ServiceError):
    status, code = 400, "INVALID_JSON"


class BodyTooLarge(ServiceError):
    status, code = 413, "BODY_TOO_LARGE"


class InvalidRequest(ServiceError):
    status, code = 422, "VALIDATION_ERROR"


class UnknownSession(ServiceError):
    status, code = 404, "UNKNOWN_SESSION"


class NotReset(ServiceError):
    status, code = 409, "NOT_RESET"


class EpisodeOver(ServiceError):
    status, code = 409, "EPISODE_OVER"


class Unauthorized(ServiceError):
    status, code = 401, "UNAUTHORIZED"


class RequestTimeout(ServiceError):
    status, code = 408, "REQUEST_TIMEOUT"


class TooManySessions(ServiceError):
    # 503 like CAPACITY_REACHED (retry once a session closes), with its own code: this
    # client holds its share of the sessions; others may still open theirs.
    status, code = 503, "TOO_MANY_SESSIONS"


class CapacityReached(ServiceError):
    # 503, not 4xx: the request is fine, the server is full; retry after a session closes or expires.
    status, code = 503, "CAPACITY_REACHED"


def parse_json(body: bytes | str, limit: int | None = None) -> Any:
    """A request body as JSON, or the ServiceError that explains why not."""
    if limit is not None and len(body) > limit:
        raise BodyTooLarge(f"body is {len(body)} bytes; the limit is {limit}", limit=limit)
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise InvalidJSON(f"body is not valid JSON: {e}") from None


def dumps(payload: Any) -> str:
    """Results as strict JSON (no NaN/Infinity, which many clients cannot read)."""
    return json.dumps(payload, allow_nan=False, separators=(",", ":"))


# -- requests -----------------------------------------------------------------------
@dataclass(frozen=True)
class ResetParams:
    seed: int
    difficulty: int
    domain: str | None
    horizon: int
    episode_id: str | None = None
    scenario: dict | None = None  # a prompt's <SYSTEM_METADATA> object: start at exactly that state


def _int_field(body: Mapping[str, Any], name: str, lo: int, hi: int, default: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):  # bool is an int in Python; 1.0 is not a seed
        raise InvalidRequest(f"{name} must be an integer in {lo}..{hi}, got {value!r}", field=name)
    if not lo <= value <= hi:
        raise InvalidRequest(f"{name} must be in {lo}..{hi}, got {value}", field=name)
    return value


def reset_params(body: Any, default_horizon: int = DEFAULT_HORIZON) -> ResetParams:
    """Validate a reset request: ``{"seed", "difficulty", "task_family" (or "domain"),
    "horizon", "episode_id", "scenario", "session_id"}``, all optional. A missing seed is drawn at random and
    reported back, as OpenEnv allows; unknown keys are refused so a typo is not a silent default."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InvalidRequest(f"reset body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - RESET_FIELDS)
    if unknown:
        raise InvalidRequest(f"unknown reset field(s) {unknown}; known: {sorted(RESET_FIELDS)}", field=unknown[0])
    seed = _int_field(body, "seed", 0, MAX_SEED, None)
    if seed is None:
        seed = secrets.randbelow(2**31)
    difficulty = _int_field(body, "difficulty", MIN_DIFFICULTY, MAX_DIFFICULTY, DEFAULT_DIFFICULTY)
    horizon = _int_field(body, "horizon", 1, MAX_HORIZON, default_horizon)
    family, domain = body.get("task_family"), body.get("domain")
    if family is not None and domain is not None and family != domain:
        raise InvalidRequest(f"task_family {family!r} and domain {domain!r} disagree; give one", field="task_family")
    domain = family if family is not None else domain
    if domain is not None and domain not in DOMAINS:
        raise InvalidRequest(f"unknown task_family {domain!r}; known: {list(DOMAINS)}", field="task_family")
    episode_id = body.get("episode_id")
    if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
        raise InvalidRequest("episode_id must be a string of at most 255 characters", field="episode_id")
    scenario = body.get("scenario")
    if scenario is not None:
        if not isinstance(scenario, dict):
            raise InvalidRequest("scenario must be the JSON object of a prompt's <SYSTEM_METADATA> block",
                                 field="scenario")
        clash = sorted({"seed", "difficulty", "task_family", "domain"} & set(body))
        if clash:
            raise InvalidRequest(f"scenario names its own seed, difficulty and family; drop {clash}", field=clash[0])
    return ResetParams(seed, difficulty, domain, horizon, episode_id, scenario)


def answer_text(action: Any) -> str:
    """The answer text a step plays, from the request's ``action``:

    - a string: the model's raw text, played verbatim (JSON or text containing it);
    - ``{"text": "..."}``: the same, in the object form OpenEnv's clients send;
    - any other object: a structured LifeStack action (``action_type``, ...), played as
      its JSON text.

    Either way the episode parses it as it parses a model's answer: an invalid action is
    a rejected, wasted turn (a result, not an error), exactly as in training."""
    if isinstance(action, str):
        return action
    if not isinstance(action, dict):
        raise InvalidRequest(f"action must be a string or a JSON object, got {type(action).__name__}", field="action")
    fields = {k: v for k, v in action.items() if k != ACTION_METADATA_KEY}
    if set(fields) == {"text"}:
        if not isinstance(fields["text"], str):
            raise InvalidRequest("action.text must be a string", field="action")
        return fields["text"]
    try:
        return json.dumps(fields, allow_nan=True)  # NaN claims reach the parser, which refuses them as a model's would
    except RecursionError:  # a request body parses deeper than json.dumps recurses: the client's fault
        raise InvalidRequest("action is nested too deeply", field="action") from None
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"action cannot be written as JSON: {exc}", field="action") from None


def step_action(body: Any) -> Any:
    """The ``action`` of a step request ``{"action": ...}``."""
    if not isinstance(body, dict):
        raise InvalidRequest(f"step body must be a JSON object {{\"action\": ...}}, got {type(body).__name__}")
    if "action" not in body:
        raise InvalidRequest('step body needs an "action": {"text": "<model answer>"} or an action object',
                             field="action")
    unknown = sorted(set(body) - {"action"} - STEP_EXTRA_FIELDS)
    if unknown:
        raise InvalidRequest(f"unknown step field(s) {unknown}", field=unknown[0])
    return body["action"]


# -- results ------------------------------------------------------------------------
def _episode_info(ep: Episode) -> dict[str, Any]:
    return {"seed": ep.seed, "difficulty": ep.difficulty, "domain": ep.task.domain,
            "conflict_id": ep.conflict.id, "horizon": ep.horizon}


def reset_result(session_id: str, ep: Episode) -> dict[str, Any]:
    """What a reset answers: the conversation the trainer's prompt starts with."""
    obs = {"text": ep.messages[-1]["content"], "messages": [dict(m) for m in ep.messages],
           "episode": _episode_info(ep), "turn": 0, "outcome": ep.outcome()}
    return {"observation": obs, "reward": None, "done": ep.done, "metadata": {"session_id": session_id}}


def step_result(session_id: str, ep: Episode, turn: Turn) -> dict[str, Any]:
    """What a step answers: the environment's reply text (None once the episode ended),
    the task reward and every component of it, the plain-words info, the action as parsed
    (None when rejected), and the trajectory's outcome so far."""
    obs = {"text": turn.observation, "action": turn.action, "reward_components": turn.breakdown,
           "info": list(turn.info), "turn": len(ep.turns), "episode": _episode_info(ep), "outcome": ep.outcome()}
    return {"observation": obs, "reward": turn.reward, "done": ep.done, "metadata": {"session_id": session_id}}


def state_result(session: Session) -> dict[str, Any]:
    """OpenEnv's State (``episode_id``, ``step_count``) and what a trainer may inspect:
    the conversation so far and the outcome. Nothing the prompts do not show."""
    ep = session.episode
    base = {"episode_id": session.episode_id or session.id, "step_count": 0, "session_id": session.id}
    if ep is None:
        return {**base, "done": False, "reset": False}
    return {**base, "step_count": len(ep.turns), "reset": True, "done": ep.done, "episode": _episode_info(ep),
            "messages": [dict(m) for m in ep.messages], "outcome": ep.outcome()}


# -- sessions -----------------------------------------------------------------------
@dataclass
class Session:
    id: str
    kind: str  # "http" (expires when idle) or "ws" (lives as long as its connection)
    created: float
    last_used: float
    episode: Episode | None = None
    episode_id: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    closed: bool = False
    owner: str = ""  # the client that opened it (its address): the per-client quota counts by it


class SessionStore:
    """Sessions by id: at most ``max_sessions`` at once, HTTP ones dropped after
    ``idle_timeout`` seconds without a request. ``clock`` is injectable for tests."""

    def __init__(self, max_sessions: int, idle_timeout: float, clock: Callable[[], float] = time.monotonic,
                 max_per_owner: int | None = None) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        if idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be > 0, got {idle_timeout}")
        if max_per_owner is not None and max_per_owner < 1:
            raise ValueError(f"max_per_owner must be >= 1, got {max_per_owner}")
        self.max_sessions, self.idle_timeout, self.clock = max_sessions, idle_timeout, clock
        self.max_per_owner = max_per_owner if max_per_owner is not None else max_sessions
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def _expired(self, s: Session, now: float) -> bool:
        return s.kind == "http" and now - s.last_used > self.idle_timeout

    def owned(self, owner: str) -> list[Session]:
        """The live sessions ``owner`` opened, oldest first."""
        with self._lock:
            now = self.clock()
            return [s for s in self._sessions.values() if s.owner == owner and not self._expired(s, now)]

    def open(self, kind: str = "http", owner: str = "") -> Session:
        now = self.clock()
        with self._lock:
            mine = sum(1 for s in self._sessions.values() if s.owner == owner)
            if len(self._sessions) >= self.max_sessions or mine >= self.max_per_owner:
                self._reap_locked(now)  # an expired session must not hold a slot a new one needs
                mine = sum(1 for s in self._sessions.values() if s.owner == owner)
            if len(self._sessions) >= self.max_sessions:
                raise CapacityReached(
                    f"session limit reached ({self.max_sessions} active); close a session or retry after "
                    f"idle ones expire ({self.idle_timeout:g} s)",
                    active_sessions=len(self._sessions), max_sessions=self.max_sessions)
            if mine >= self.max_per_owner:
                raise TooManySessions(
                    f"this client holds {mine} sessions, its share of the server ({self.max_per_owner}); close one "
                    f"(DELETE /sessions/<id>) or let idle ones expire ({self.idle_timeout:g} s)",
                    client_sessions=mine, max_sessions_per_client=self.max_per_owner)
            s = Session(uuid.uuid4().hex, kind, now, now, owner=owner)
            self._sessions[s.id] = s
            return s

    def get(self, session_id: Any) -> Session:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidRequest("session_id is required (the one /reset returned in metadata.session_id)",
                                 field="session_id")
        now = self.clock()
        with self._lock:
            s = self._sessions.get(session_id)
            if s is not None and self._expired(s, now):
                self._drop_locked(s)
                s = None
            if s is None:
                raise UnknownSession(f"unknown or expired session {session_id!r}; /reset starts a new one")
            s.last_used = now
            return s

    @contextmanager
    def use(self, session_id: Any) -> Iterator[Session]:
        """The session, held exclusively; its idle clock restarts when the work ends."""
        s = self.get(session_id)
        with s.lock:
            if s.closed:  # closed or reaped while this request waited for the lock
                raise UnknownSession(f"session {session_id!r} was closed")
            try:
                yield s
            finally:
                s.last_used = self.clock()

    def close(self, session_id: str) -> bool:
        with self._lock:
            s = self._sessions.get(session_id)
            if s is not None:
                self._drop_locked(s)
            return s is not None

    def reap(self) -> list[str]:
        """Drop HTTP sessions idle past the timeout; their ids."""
        with self._lock:
            return self._reap_locked(self.clock())

    def _reap_locked(self, now: float) -> list[str]:
        stale = [s for s in self._sessions.values() if self._expired(s, now) and not s.lock.locked()]
        for s in stale:
            self._drop_locked(s)
        return [s.id for s in stale]

    def _drop_locked(self, s: Session) -> None:
        s.closed = True
        self._sessions.pop(s.id, None)


# -- the service ------------------------------------------------------------------
class LifeStackService:
    """reset / step / state / close on sessions, each returning an OpenEnv-shaped dict
    or raising a ServiceError. The transport only moves bytes."""

    def __init__(self, max_sessions: int = 256, idle_timeout: float = 600.0, horizon: int = DEFAULT_HORIZON,
                 clock: Callable[[], float] = time.monotonic, max_sessions_per_client: int | None = None) -> None:
        if not 1 <= horizon <= MAX_HORIZON:
            raise ValueError(f"horizon must be in 1..{MAX_HORIZON}, got {horizon}")
        self.sessions = SessionStore(max_sessions, idle_timeout, clock, max_sessions_per_client)
        self.horizon = horizon

    @staticmethod
    def episode(params: ResetParams) -> Episode:
        """The episode a reset starts: the same seed, difficulty and family give the same
        scenario as ``sample_scenario`` in-process, hence the same prompts."""
        if params.scenario is not None:
            try:
                return Episode.from_metadata(params.scenario, params.horizon)
            except ValueError as exc:
                raise InvalidRequest(f"scenario: {exc}", field="scenario") from None
        return Episode.from_scenario(sample_scenario(params.seed, params.difficulty, params.domain), params.horizon)

    def reset(self, body: Any, session_id: str | None = None, owner: str = "") -> dict[str, Any]:
        """Start an episode: in a new session (HTTP) or in ``session_id``'s (a WebSocket's,
        or an HTTP caller reusing its slot). The request is validated before a slot is taken.
        ``owner``: the client (its address), for the per-client session quota."""
        if isinstance(body, dict) and session_id is None:
            session_id = body.get("session_id")
        params = reset_params(body, self.horizon)
        ep = self.episode(params)
        if session_id is None:
            s = self.sessions.open("http", owner)
            with self.sessions.use(s.id) as s:
                s.episode, s.episode_id = ep, params.episode_id
                return reset_result(s.id, ep)
        with self.sessions.use(session_id) as s:
            s.episode, s.episode_id = ep, params.episode_id
            return reset_result(s.id, ep)

    def implied_session(self, owner: str) -> str:
        """The session a step without a session id plays (OpenEnv's plain HTTP shape:
        reset, then step): the client's only open HTTP session."""
        mine = [s for s in self.sessions.owned(owner) if s.kind == "http"]
        if len(mine) == 1:
            return mine[0].id
        raise InvalidRequest(
            "session_id is required: send the one /reset returned in metadata.session_id"
            + (f" (this client has {len(mine)} open sessions)" if mine else " (this client has no open session: "
                                                                            "POST /reset first)"),
            field="session_id", client_sessions=len(mine))

    def step(self, session_id: Any, action: Any) -> dict[str, Any]:
        text = answer_text(action)
        with self.sessions.use(session_id) as s:
            ep = s.episode
            if ep is None:
                raise NotReset("this session has no episode yet; send a reset first")
            if ep.done:
                raise EpisodeOver(f"the episode is over after {len(ep.turns)} turn(s); reset to start another",
                                  outcome=ep.outcome())
            return step_result(s.id, ep, ep.step(text))

    def state(self, session_id: Any) -> dict[str, Any]:
        with self.sessions.use(session_id) as s:
            return state_result(s)

    def close(self, session_id: str) -> bool:
        return self.sessions.close(session_id)

    def capacity(self) -> dict[str, Any]:
        """OpenEnv's ServerCapacityStatus, plus the idle timeout and the per-client quota."""
        return {"active_sessions": len(self.sessions), "max_sessions": self.sessions.max_sessions,
                "max_sessions_per_client": self.sessions.max_per_owner, "idle_timeout_s": self.sessions.idle_timeout}


# -- schemas (OpenEnv's /schema: JSON Schema of action, observation, state) ---------
_STR_OR_NULL = {"type": ["string", "null"]}
_EPISODE = {"type": "object", "properties": {
    "seed": {"type": "integer"}, "difficulty": {"type": "integer"}, "domain": {"type": "string"},
    "conflict_id": {"type": "string"}, "horizon": {"type": "integer"}}}
_OUTCOME = {"type": "object", "description": "lifestack.value.episode_outcome of the trajectory so far"}

SCHEMAS: dict[str, Any] = {
    "action": {
        "title": "LifeStackAction",
        "description": "The model's answer: its raw text ({\"text\": ...}, or the action as a plain string), or the "
                       "action object itself. Parsed like a model's answer; an invalid one is a rejected turn.",
        "oneOf": [
            {"type": "string"},
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            {"type": "object", "properties": {
                "action_type": {"type": "string"}, "target_domain": {"type": "string"}, "route": _STR_OR_NULL,
                "metric_changes": {"type": "object", "additionalProperties": {"type": "number"}},
                "resource_cost": {"type": "object", "additionalProperties": {"type": "number"}},
                "reasoning": {"type": "string"}}},
        ],
    },
    "observation": {
        "title": "LifeStackObservation", "type": "object",
        "properties": {
            "text": {**_STR_OR_NULL, "description": "the environment's reply, the next user message; null when done"},
            "action": {"type": ["object", "null"], "description": "the action as parsed; null when rejected"},
            "reward_components": {"type": "object", "description": "every reward component and penalty by name"},
            "info": {"type": "array", "items": {"type": "string"}},
            "turn": {"type": "integer"}, "episode": _EPISODE, "outcome": _OUTCOME},
    },
    "reset_observation": {
        "title": "LifeStackResetObservation", "type": "object",
        "properties": {
            "text": {"type": "string", "description": "the first user message: the trainer's prompt text"},
            "messages": {"type": "array", "items": {"type": "object", "properties": {
                "role": {"type": "string"}, "content": {"type": "string"}}}},
            "turn": {"type": "integer"}, "episode": _EPISODE, "outcome": _OUTCOME},
    },
    "state": {
        "title": "LifeStackState", "type": "object",
        "properties": {
            "episode_id": {"type": "string"}, "step_count": {"type": "integer"}, "session_id": {"type": "string"},
            "reset": {"type": "boolean"}, "done": {"type": "boolean"}, "episode": _EPISODE,
            "messages": {"type": "array"}, "outcome": _OUTCOME},
    },
}

METADATA: dict[str, Any] = {
    "name": ENV_NAME,
    "description": "A deterministic life-conflict simulation: closed-loop episodes whose prompts, rewards and "
                   "reward components are those of the LifeStack GRPO trainer.",
    "version": "0.1.0",
}
