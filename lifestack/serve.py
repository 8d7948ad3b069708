"""The environment over the network: ``python -m lifestack.serve``.

HTTP and WebSocket endpoints in the shape of OpenEnv's contract (``openenv`` 0.10.0),
over the sessions of :mod:`lifestack.service`:

- ``GET /health``, ``GET /metadata``, ``GET /schema``: as OpenEnv serves them.
- ``POST /reset`` ``{"seed": N, "difficulty": 1-5, "task_family": ..., "horizon": ...}``:
  starts an episode in a new session; its id is in the result's ``metadata.session_id``.
- ``POST /step`` ``{"action": {"text": "<model answer>"}, "session_id": ...}``.
- ``GET /state?session_id=...``; ``DELETE /sessions/{id}``; ``GET /sessions`` (capacity).
- ``WS /ws``: one session per connection, OpenEnv's messages (``{"type": "reset" |
  "step" | "state" | "close", "data": {...}}``), which is what OpenEnv's ``EnvClient``
  (hence TRL's and other trainers' OpenEnv integrations) speaks.

OpenEnv's own HTTP ``/reset`` and ``/step`` are stateless (a fresh environment per
request) and only its WebSocket keeps an episode; here HTTP keeps one too, by session
id, so that curl and a plain HTTP client can play whole episodes.

Needs the ``serve`` extra (``pip install -e ".[serve]"``): FastAPI, uvicorn, websockets.
docs/serve.md has the shapes, limits and errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import json
import logging
import os
import re
import socket
import threading
from typing import Any, Iterator

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .service import (
    DEFAULT_HORIZON, METADATA, SCHEMAS, BodyTooLarge, InvalidRequest, LifeStackService, RequestTimeout,
    ServiceError, Unauthorized, UnknownSession, dumps, parse_json, step_action,
)

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB: a model's answer is a few KB; anything near this is not one
DEFAULT_MAX_SESSIONS = 256
DEFAULT_MAX_SESSIONS_PER_CLIENT = 64  # one client (address) may hold this many: it cannot lock the others out
DEFAULT_IDLE_TIMEOUT = 600.0  # seconds an HTTP session may sit unused; a WebSocket may sit as long
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds a connection may take to send a request's line and headers
DEFAULT_BODY_TIMEOUT = 30.0  # seconds a request may take to send its body
DEFAULT_KEEP_ALIVE = 5.0  # seconds an idle keep-alive connection is held between requests
DEFAULT_SHUTDOWN_TIMEOUT = 3.0  # seconds SIGTERM waits for requests in flight before it cuts them
TOKEN_ENV = "LIFESTACK_SERVE_TOKEN"  # set: every endpoint but /health needs "Authorization: Bearer <token>"
log = logging.getLogger("lifestack.serve")


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content).encode()


def error_response(err: ServiceError) -> JSON:
    headers = {"Retry-After": "1"} if err.status == 503 else None
    if err.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    if err.status == 408:
        headers = {"Connection": "close"}  # the rest of that body is not worth waiting for
    return JSON(err.to_dict(), status_code=err.status, headers=headers)


def token_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, compared in constant time."""
    given = (header or "").removeprefix("Bearer ").strip() if (header or "").startswith("Bearer ") else ""
    return hmac.compare_digest(given.encode(), token.encode())


def client_of(conn: Request | WebSocket) -> str:
    """Who opened a session, for the per-client quota: the peer's address."""
    return conn.client.host if conn.client is not None else ""


async def read_json(request: Request, limit: int, timeout: float = DEFAULT_BODY_TIMEOUT) -> Any:
    """The body as JSON, refusing one over ``limit`` bytes before reading it all: a
    declared Content-Length is checked first, a chunked body while it streams in. A body
    that takes longer than ``timeout`` seconds to arrive is refused (408)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"body is {declared} bytes; the limit is {limit}", limit=limit)

    async def read() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"body exceeds the limit of {limit} bytes", limit=limit)
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        body = await asyncio.wait_for(read(), timeout)  # (asyncio.timeout is 3.11+; the package supports 3.10)
    except asyncio.TimeoutError:
        raise RequestTimeout(f"the body did not arrive within {timeout:g} s", timeout_s=timeout) from None
    except ClientDisconnect:  # it left (or sent a body uvicorn refused); the answer goes nowhere
        raise InvalidRequest("the client disconnected before its body arrived") from None
    if not body.strip():
        return None
    return parse_json(body)


def create_app(service: LifeStackService, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, token: str | None = None,
               body_timeout: float = DEFAULT_BODY_TIMEOUT) -> FastAPI:
    """The ASGI app. Service calls run on the event loop, without awaiting: a step is a
    fraction of a millisecond of Python, less than a hop to a worker thread costs.
    ``token``: when set, every endpoint but ``/health`` (HTTP and the WebSocket handshake)
    needs ``Authorization: Bearer <token>``."""

    async def reap_forever() -> None:
        interval = min(30.0, max(0.05, service.sessions.idle_timeout / 2))
        while True:
            await asyncio.sleep(interval)
            dropped = service.sessions.reap()
            if dropped:
                log.info("expired %d idle session(s)", len(dropped))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        task = asyncio.create_task(reap_forever())
        try:
            yield
        finally:
            task.cancel()

    app = FastAPI(title="LifeStack environment (OpenEnv contract)", version=METADATA["version"], lifespan=lifespan)

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, err: ServiceError) -> JSON:
        return error_response(err)

    if token:
        @app.middleware("http")
        async def _require_token(request: Request, call_next):
            if request.url.path != "/health" and not token_matches(request.headers.get("authorization"), token):
                return error_response(Unauthorized("missing or wrong bearer token (Authorization: Bearer <token>)"))
            return await call_next(request)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> JSON:  # unknown path, wrong method
        return JSON({"detail": err.detail, "code": "NOT_FOUND" if err.status_code == 404 else "HTTP_ERROR"},
                    status_code=err.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, err: Exception) -> JSON:
        # A bug must cost one request, not the server or another session.
        log.exception("unexpected error on %s", request.url.path)
        return JSON({"detail": f"internal error: {type(err).__name__}", "code": "INTERNAL_ERROR"}, status_code=500)

    @app.get("/health")
    async def health() -> JSON:
        return JSON({"status": "healthy"})

    @app.get("/metadata")
    async def metadata() -> JSON:
        return JSON(METADATA)

    @app.get("/schema")
    async def schema() -> JSON:
        return JSON(SCHEMAS)

    @app.get("/sessions")
    async def sessions() -> JSON:
        return JSON(service.capacity())

    @app.post("/reset")
    async def reset(request: Request) -> JSON:
        body = await read_json(request, max_body_bytes, body_timeout)
        return JSON(service.reset(body, owner=client_of(request)))

    @app.post("/step")
    async def step(request: Request) -> JSON:
        body = await read_json(request, max_body_bytes, body_timeout)
        action = step_action(body)
        session_id = body.get("session_id") or request.query_params.get("session_id")
        if session_id is None:  # OpenEnv's plain HTTP shape: reset, then step; the client's only session
            session_id = service.implied_session(client_of(request))
        return JSON(service.step(session_id, action))

    @app.get("/state")
    async def state(session_id: str | None = None) -> JSON:
        return JSON(service.state(session_id))

    @app.delete("/sessions/{session_id}")
    async def close(session_id: str) -> JSON:
        if not service.close(session_id):
            raise UnknownSession(f"unknown or expired session {session_id!r}")
        return JSON({"session_id": session_id, "closed": True})

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        if token and not token_matches(websocket.headers.get("authorization"), token):
            await websocket.close(code=1008)  # before accept: the handshake is refused (HTTP 403)
            return
        await websocket.accept()
        try:
            session = service.sessions.open("ws", client_of(websocket))
        except ServiceError as err:  # full: say so (OpenEnv's CAPACITY_REACHED), then close
            await websocket.send_text(dumps(ws_error(err)))
            await websocket.close(code=1013)  # "try again later"
            return
        try:
            await ws_session(websocket, service, session.id, max_body_bytes)
        except WebSocketDisconnect:  # the client left mid-answer; nothing to tell it
            pass
        finally:
            service.close(session.id)

    return app


def ws_error(err: ServiceError) -> dict[str, Any]:
    return {"type": "error", "data": {"message": err.message, "code": err.code, "status": err.status, **err.extra}}


async def ws_session(websocket: WebSocket, service: LifeStackService, session_id: str,
                     max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """One connection's messages, answered in order. An error answers that message and
    the session goes on; silence longer than the idle timeout ends it. A message over
    ``max_bytes`` closes the connection (1009) unread, whatever limit the launcher gave
    uvicorn (``uvicorn lifestack.serve:app`` keeps uvicorn's 16 MiB)."""
    timeout = service.sessions.idle_timeout
    while True:
        try:
            message = await asyncio.wait_for(websocket.receive(), timeout)
        except asyncio.TimeoutError:
            await websocket.send_text(dumps(ws_error(ServiceError(f"session idle for {timeout:g} s; closed"))))
            await websocket.close(code=1000)
            return
        if message["type"] == "websocket.disconnect":
            return
        raw = message.get("text") if message.get("text") is not None else message.get("bytes") or b""
        if message_bytes(raw) > max_bytes:
            await websocket.close(code=1009)  # "message too big"
            return
        try:
            reply = ws_reply(service, session_id, parse_json(raw))
        except ServiceError as err:
            reply = ws_error(err)
        except Exception as err:  # a bug costs this message, not the connection
            log.exception("unexpected error in a WebSocket session")
            reply = {"type": "error", "data": {"message": f"internal error: {type(err).__name__}",
                                               "code": "EXECUTION_ERROR", "status": 500}}
        if reply is None:  # "close"
            await websocket.close(code=1000)
            return
        await websocket.send_text(dumps(reply))


def message_bytes(raw: str | bytes) -> int:
    """A WebSocket message's size in bytes, as uvicorn's ``ws_max_size`` counts it (a text's UTF-8 length)."""
    return len(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else len(raw)


def ws_reply(service: LifeStackService, session_id: str, msg: Any) -> dict[str, Any] | None:
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise WSUnknownType('a message is a JSON object {"type": "reset" | "step" | "state" | "close", "data": {...}}')
    kind, data = msg["type"], msg.get("data")
    if kind == "reset":
        return {"type": "observation", "data": service.reset(data or {}, session_id=session_id)}
    if kind == "step":
        if data is None:
            raise InvalidRequest('a step message needs "data": the action')
        # OpenEnv's clients send the action itself as data; {"action": ...} is accepted too.
        action = data["action"] if isinstance(data, dict) and set(data) - {"metadata"} == {"action"} else data
        return {"type": "observation", "data": service.step(session_id, action)}
    if kind == "state":
        return {"type": "state", "data": service.state(session_id)}
    if kind == "close":
        return None
    raise WSUnknownType(f"unknown message type {kind!r}; known: reset, step, state, close")


class WSUnknownType(ServiceError):
    status, code = 400, "UNKNOWN_TYPE"  # OpenEnv's WSErrorCode


# -- running it -----------------------------------------------------------------------
def _raw_json_response(status: int, reason: str, payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


def guarded_protocol(header_timeout: float):
    """uvicorn's h11 protocol with a deadline for each request's line and headers (uvicorn
    has none: a client that sends half a request holds its connection for ever), and its
    own errors in the JSON error shape instead of plain text."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _waiting_for_a_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and self._waiting_for_a_head():  # the next request on a kept-alive connection
                self._arm_head_timer()
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if not self._waiting_for_a_head():  # a head arrived; the body has its own deadline (read_json)
                self._cancel_head_timer()

        def handle_websocket_upgrade(self, event) -> None:
            self._cancel_head_timer()  # the connection is the WebSocket protocol's now
            super().handle_websocket_upgrade(event)

        def connection_lost(self, exc) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or not self._waiting_for_a_head():
                return
            self.transport.write(_raw_json_response(408, "Request Timeout", {
                "detail": f"the request line and headers did not arrive within {header_timeout:g} s",
                "code": "REQUEST_TIMEOUT", "timeout_s": header_timeout}))
            self.transport.close()

        def send_400_response(self, msg: str) -> None:
            import h11

            body = json.dumps({"detail": f"{msg} (malformed HTTP)", "code": "INVALID_HTTP"}).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                       (b"content-length", str(len(body)).encode())]
            for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"), h11.Data(data=body),
                          h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return GuardedH11Protocol


class MaskSessionIds(logging.Filter):
    """Session ids never reach a log: the access log's request line (``/state?session_id=...``,
    ``DELETE /sessions/<id>``) shows ``<session>`` in their place (an id is a capability)."""

    ID = re.compile(r"[0-9a-f]{32}")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = tuple(self.ID.sub("<session>", a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = self.ID.sub("<session>", record.msg)
        return True


def mask_session_ids_in_access_log() -> None:
    """Add :class:`MaskSessionIds` to uvicorn's access logger, once (by name, so it holds for
    whichever launcher configured uvicorn)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, MaskSessionIds) for f in access.filters):
        access.addFilter(MaskSessionIds())


def uvicorn_server(app: FastAPI, max_body_bytes: int, access_log: bool = False,
                   header_timeout: float = DEFAULT_HEADER_TIMEOUT, keep_alive: float = DEFAULT_KEEP_ALIVE,
                   shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT, **config: Any):
    import uvicorn

    # ws_max_size bounds a WebSocket message as max_body_bytes bounds an HTTP body (close code 1009).
    mask_session_ids_in_access_log()
    cfg = uvicorn.Config(app, http=guarded_protocol(header_timeout), ws_max_size=max_body_bytes,
                         timeout_keep_alive=keep_alive, timeout_graceful_shutdown=shutdown_timeout,
                         access_log=access_log, log_level=config.pop("log_level", "warning"), **config)
    return uvicorn.Server(cfg)


@contextlib.contextmanager
def serving(service: LifeStackService | None = None, host: str = "127.0.0.1", port: int = 0,
            max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, token: str | None = None,
            body_timeout: float = DEFAULT_BODY_TIMEOUT, **timeouts: float) -> Iterator[str]:
    """Run a server in a background thread (tests, benchmarks); yields its base URL.
    Port 0 takes a free port. ``timeouts``: ``header_timeout``, ``keep_alive``,
    ``shutdown_timeout`` (seconds)."""
    service = service or LifeStackService()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn_server(create_app(service, max_body_bytes, token, body_timeout), max_body_bytes, **timeouts)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="lifestack-serve")
    thread.start()
    try:
        for _ in range(1000):
            if server.started or not thread.is_alive():
                break
            threading.Event().wait(0.01)
        if not server.started:
            raise RuntimeError("the server did not start")
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def __getattr__(name: str) -> Any:
    # ``lifestack.serve:app`` (openenv.yaml, ``uvicorn lifestack.serve:app``): an app with the
    # default limits, built on first use rather than on import.
    if name == "app":
        mask_session_ids_in_access_log()  # uvicorn's access log is on unless --no-access-log
        globals()["app"] = create_app(LifeStackService(DEFAULT_MAX_SESSIONS, DEFAULT_IDLE_TIMEOUT, DEFAULT_HORIZON,
                                                       max_sessions_per_client=DEFAULT_MAX_SESSIONS_PER_CLIENT),
                                      token=os.environ.get(TOKEN_ENV) or None)
        return globals()["app"]
    raise AttributeError(f"module 'lifestack.serve' has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m lifestack.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 in a container)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                   help="sessions alive at once (HTTP and WebSocket); past it /reset answers 503")
    p.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT,
                   help="seconds after which an unused session is dropped")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help="largest request body or WebSocket message; larger ones get 413 (WebSocket: close 1009)")
    p.add_argument("--horizon", type=int, default=DEFAULT_HORIZON,
                   help="turns per episode when a reset does not say (the task may end sooner)")
    p.add_argument("--max-sessions-per-client", type=int, default=DEFAULT_MAX_SESSIONS_PER_CLIENT,
                   help="sessions one client address may hold; past it /reset answers 503 TOO_MANY_SESSIONS (default %(default)s)")
    p.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT,
                   help="seconds a request may take to send its line and headers; then 408 and close")
    p.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT,
                   help="seconds a request may take to send its body; then 408 and close")
    p.add_argument("--keep-alive", type=float, default=DEFAULT_KEEP_ALIVE,
                   help="seconds an idle keep-alive connection is held between requests")
    p.add_argument("--shutdown-timeout", type=float, default=DEFAULT_SHUTDOWN_TIMEOUT,
                   help="seconds SIGTERM waits for requests in flight before it cuts them and exits")
    p.add_argument("--token", default=None,
                   help=f"require 'Authorization: Bearer <token>' on every endpoint but /health (default: ${TOKEN_ENV})")
    p.add_argument("--access-log", action="store_true", help="log every request, session ids masked (slows the server)")
    args = p.parse_args(argv)
    for name in ("max_sessions_per_client",):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("header_timeout", "body_timeout", "keep_alive", "shutdown_timeout"):
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    service = LifeStackService(args.max_sessions, args.idle_timeout, args.horizon,
                               max_sessions_per_client=args.max_sessions_per_client)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    log.info("LifeStack environment on http://%s:%d (max %d sessions, %d per client, idle timeout %g s, body limit "
             "%d bytes, header/body timeouts %g/%g s, token %s)", args.host, args.port, args.max_sessions,
             args.max_sessions_per_client, args.idle_timeout, args.max_body_bytes, args.header_timeout,
             args.body_timeout, "required" if token else "off")
    if token is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("listening on %s without %s: anyone who reaches the port can use it", args.host, TOKEN_ENV)
    uvicorn_server(create_app(service, args.max_body_bytes, token, args.body_timeout), args.max_body_bytes,
                   access_log=args.access_log, header_timeout=args.header_timeout, keep_alive=args.keep_alive,
                   shutdown_timeout=args.shutdown_timeout, host=args.host, port=args.port, log_level="info").run()


if __name__ == "__main__":
    main()
