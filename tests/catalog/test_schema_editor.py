"""``foundry-ext schema`` in a real editor engine: yaml-language-server (VS Code's YAML extension and others).

The server runs as editors run it (``--stdio``, the Language Server Protocol), on a YAML whose first line points at
the schema (``# yaml-language-server: $schema=...``), as docs/cli.md tells users to write it. scripts/setup.sh
installs the server with npm into .venv/yaml-language-server.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.cli import main
from tests.support.launcher import REPO

SERVER = REPO / ".venv" / "yaml-language-server" / "node_modules" / ".bin" / "yaml-language-server"

pytestmark = pytest.mark.skipif(not SERVER.exists(), reason="yaml-language-server not installed (needs npm)")


class LanguageServer:
    """A minimal LSP client over stdio: requests, and the diagnostics the server publishes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([str(SERVER), "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = out.read(1)
                if not byte:
                    return
                header += byte
            length = next(
                int(h.split(":")[1]) for h in header.decode().split("\r\n") if h.lower().startswith("content-length")
            )
            self.inbox.put(json.loads(out.read(length)))

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        self.proc.stdin.flush()

    def _handle(self, message: dict[str, Any]) -> None:
        if message.get("method") == "textDocument/publishDiagnostics":
            self.diagnostics[message["params"]["uri"]] = message["params"]["diagnostics"]
        elif "id" in message and "method" in message:  # the server asks for its settings
            settings = [{"validate": True, "completion": True, "hover": True}]
            self.send(
                {"id": message["id"], "result": settings if message["method"] == "workspace/configuration" else None}
            )

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.inbox.get(timeout=60)
            if message.get("id") == self.next_id and "method" not in message:
                return message.get("result")
            self._handle(message)

    def open(self, path: Path) -> list[dict[str, Any]]:
        uri = path.as_uri()
        doc = {"uri": uri, "languageId": "yaml", "version": 1, "text": path.read_text()}
        self.send({"method": "textDocument/didOpen", "params": {"textDocument": doc}})
        deadline = time.monotonic() + 60
        while uri not in self.diagnostics and time.monotonic() < deadline:
            try:
                self._handle(self.inbox.get(timeout=1))
            except queue.Empty:
                pass
        return self.diagnostics[uri]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("editor")
    assert main(["schema", "--out", str(folder / "train.schema.json")]) == 0
    ls = LanguageServer()
    ls.request("initialize", {"processId": os.getpid(), "rootUri": folder.as_uri(), "capabilities": {}})
    ls.send({"method": "initialized", "params": {}})
    ls.send({"method": "workspace/didChangeConfiguration", "params": {"settings": {"yaml": {"validate": True}}}})
    yield ls, folder
    ls.close()


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"# yaml-language-server: $schema={folder / 'train.schema.json'}\n{body}")
    return path


def test_a_typo_and_a_bad_value_are_flagged_where_they_are(server: Any) -> None:
    ls, folder = server
    doc = write(
        folder,
        "bad.yaml",
        "max_duration: 100ba\nscheduler:\n  name: warmup_stable_decay\n  decay_tpye: sqrt\n  alpha_f: 1.5\n",
    )
    found = {(d["range"]["start"]["line"], d["message"]) for d in ls.open(doc)}
    assert (4, "Property decay_tpye is not allowed.") in found
    assert (5, "Value is above the maximum of 1.") in found


def test_every_example_yaml_has_no_diagnostic(server: Any) -> None:
    ls, folder = server
    for example in sorted((REPO / "yamls").glob("*.yaml")):
        doc = write(folder, example.name, example.read_text())
        assert ls.open(doc) == [], example.name


def test_names_are_completed_and_keys_explained(server: Any) -> None:
    ls, folder = server
    doc = write(folder, "ok.yaml", "max_duration: 100ba\nscheduler:\n  name: warmup_stable_decay\n  alpha_f: 0.1\n")
    assert ls.open(doc) == []
    uri = doc.as_uri()
    completion = ls.request(
        "textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 8}}
    )
    items = completion["items"] if isinstance(completion, dict) else completion
    assert set(SCHEDULE_MODELS) <= {item["label"] for item in items}
    hover = ls.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 4}})
    assert "final multiplier: the LR floor as a fraction of the LR" in hover["contents"]["value"]
