"""A small design API (FastAPI), served on a loopback port with the OpenAPI document FastAPI makes of
it at /openapi.json: the real API the OpenAPI tools are tested against."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException, Query, Response, Security
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, Field

KEY = "dk_live_0123456789abcdef"


class Element(BaseModel):
    """An element of a page; groups hold elements (a recursive schema)."""

    kind: str
    text: str | None = None
    children: list[Element] = []


class Size(BaseModel):
    width: int = Field(1080, ge=1, le=8000)
    height: int = Field(1080, ge=1, le=8000)


class NewDesign(BaseModel):
    title: str = Field(min_length=1, description="The design's title")
    size: Size = Size()
    template_id: str | None = None


class Design(BaseModel):
    id: str
    title: str
    size: Size
    elements: list[Element] = []


class DesignList(BaseModel):
    designs: list[Design]
    page: int


class Export(BaseModel):
    url: str


class DesignsApi:
    """The API's state, and the app; ``limited`` 429s answer the next exports first."""

    def __init__(self) -> None:
        self.designs: dict[str, Design] = {
            "d1": Design(id="d1", title="Launch", size=Size(),
                         elements=[Element(kind="group", children=[Element(kind="text", text="Hello")])]),
        }
        self.limited = 0
        self.retry_after = "1"
        self.requests: list[tuple[str, str, str | None]] = []
        self.app = self._app()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def _app(self) -> FastAPI:
        app = FastAPI(title="Design API", version="1.0.0")
        key_header = APIKeyHeader(name="X-API-Key", auto_error=False)
        api = self

        def check(key: str | None) -> None:
            if key != KEY:
                raise HTTPException(401, "invalid API key")

        @app.middleware("http")
        async def record(request: Any, call_next: Any) -> Any:
            api.requests.append((request.method, request.url.path, request.headers.get("x-api-key")))
            return await call_next(request)

        @app.get("/designs", operation_id="listDesigns", tags=["designs"], summary="The caller's designs")
        def list_designs(page: int = Query(1, ge=1), q: str | None = Query(None, description="Words in the title"),
                         key: str | None = Security(key_header)) -> DesignList:
            check(key)
            found = [d for d in api.designs.values() if not q or q.lower() in d.title.lower()]
            return DesignList(designs=found, page=page)

        @app.get("/designs/{design_id}", operation_id="getDesign", tags=["designs"], summary="One design")
        def get_design(design_id: str, key: str | None = Security(key_header)) -> Design:
            check(key)
            if design_id not in api.designs:
                raise HTTPException(404, "design not found")
            return api.designs[design_id]

        @app.post("/designs", operation_id="createDesign", tags=["designs"], status_code=201,
                  summary="Create a design", description="Blank, or from a template.")
        def create_design(body: NewDesign, key: str | None = Security(key_header)) -> Design:
            check(key)
            design = Design(id=f"d{len(api.designs) + 1}", title=body.title, size=body.size)
            api.designs[design.id] = design
            return design

        @app.delete("/designs/{design_id}", operation_id="deleteDesign", tags=["designs"], status_code=204)
        def delete_design(design_id: str, key: str | None = Security(key_header)) -> Response:
            check(key)
            api.designs.pop(design_id, None)
            return Response(status_code=204)

        @app.post("/designs/{design_id}/export", operation_id="designs.export", tags=["export"],
                  summary="Render a design", response_model=Export)
        def export_design(design_id: str, format: str = Query("png", pattern="^(png|pdf|svg)$"),  # noqa: A002
                          key: str | None = Security(key_header)) -> Any:
            check(key)
            if api.limited:
                api.limited -= 1
                return JSONResponse({"detail": "slow down"}, status_code=429,
                                    headers={"Retry-After": api.retry_after})
            return Export(url=f"https://cdn.example/{design_id}.{format}")

        @app.get("/admin/stats", operation_id="adminStats", tags=["admin"])
        def stats(key: str | None = Security(key_header)) -> dict[str, int]:
            check(key)
            return {"designs": len(api.designs)}

        return app

    def start(self) -> DesignsApi:
        # the socket is bound and listening before the thread starts: a request made at once waits
        # in the backlog until uvicorn accepts it, so nothing needs to wait for start-up here
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[sock])), daemon=True)
        self._thread.start()
        self._sock = sock
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._sock.close()
