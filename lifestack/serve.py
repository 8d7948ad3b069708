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
import logging
import socket
import threading
from typing import Any, Iterator

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from .service import (
    DEFAULT_HORIZON, METADATA, SCHEMAS, BodyTooLarge, InvalidRequest, LifeStackService, ServiceError,
    UnknownSession, dumps, parse_json, step_action,
)

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB: a model's answer is a few KB; anything near this is not one
DEFAULT_MAX_SESSIONS = 256
DEFAULT_IDLE_TIMEOUT = 600.0  # seconds an HTTP session may sit unused; a WebSocket may sit as long
log = logging.getLogger("lifestack.serve")


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content).encode()


def error_response(err: ServiceError) -> JSON:
    headers = {"Retry-After": "1"} if err.status == 503 else None
    return JSON(err.to_dict(), status_code=err.status, headers=headers)


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, refusing one over ``limit`` bytes before reading it all: a
    declared Content-Length is checked first, a chunked body while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"body is {declared} bytes; the limit is {limit}", limit=limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"body exceeds the limit of {limit} bytes", limit=limit)
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        return None
    return parse_json(body)


def create_app(service: LifeStackService, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The ASGI app. Service calls run on the event loop, without awaiting: a step is a
    fraction of a millisecond of Python, less than a hop to a worker thread costs."""

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
        body = await read_json(request, max_body_bytes)
        return JSON(service.reset(body))

    @app.post("/step")
    async def step(request: Request) -> JSON:
        body = await read_json(request, max_body_bytes)
        action = step_action(body)
        return JSON(service.step(body.get("session_id") or request.query_params.get("session_id"), action))

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
        await websocket.accept()
        try:
            session = service.sessions.open("ws")
        except ServiceError as err:  # full: say so (OpenEnv's CAPACITY_REACHED), then close
            await websocket.send_text(dumps(ws_error(err)))
            await websocket.close(code=1013)  # "try again later"
            return
        try:
            await ws_session(websocket, service, session.id)
        except WebSocketDisconnect:  # the client left mid-answer; nothing to tell it
            pass
        finally:
            service.close(session.id)

    return app


def ws_error(err: ServiceError) -> dict[str, Any]:
    return {"type": "error", "data": {"message": err.message, "code": err.code, "status": err.status, **err.extra}}


async def ws_session(websocket: WebSocket, service: LifeStackService, session_id: str) -> None:
    """One connection's messages, answered in order. An error answers that message and
    the session goes on; silence longer than the idle timeout ends it."""
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
def uvicorn_server(app: FastAPI, max_body_bytes: int, access_log: bool = False, **config: Any):
    import uvicorn

    # ws_max_size bounds a WebSocket message as max_body_bytes bounds an HTTP body (close code 1009).
    cfg = uvicorn.Config(app, ws_max_size=max_body_bytes, timeout_keep_alive=30, access_log=access_log,
                         log_level=config.pop("log_level", "warning"), **config)
    return uvicorn.Server(cfg)


@contextlib.contextmanager
def serving(service: LifeStackService | None = None, host: str = "127.0.0.1", port: int = 0,
            max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Iterator[str]:
    """Run a server in a background thread (tests, benchmarks); yields its base URL.
    Port 0 takes a free port."""
    service = service or LifeStackService()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn_server(create_app(service, max_body_bytes), max_body_bytes)
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
        globals()["app"] = create_app(LifeStackService(DEFAULT_MAX_SESSIONS, DEFAULT_IDLE_TIMEOUT, DEFAULT_HORIZON))
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
    p.add_argument("--access-log", action="store_true", help="log every request (slows the server)")
    args = p.parse_args(argv)
    service = LifeStackService(args.max_sessions, args.idle_timeout, args.horizon)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    log.info("LifeStack environment on http://%s:%d (max %d sessions, idle timeout %g s, body limit %d bytes)",
             args.host, args.port, args.max_sessions, args.idle_timeout, args.max_body_bytes)
    uvicorn_server(create_app(service, args.max_body_bytes), args.max_body_bytes, access_log=args.access_log,
                   host=args.host, port=args.port, log_level="info").run()


if __name__ == "__main__":
    main()
