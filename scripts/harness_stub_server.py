"""A tiny OpenAI-compatible chat server for `make test-harness`: answers every /v1/chat/completions request
deterministically from the request's text, so that a harness run is reproducible without a model.

The answer depends only on the prompt text (a SHA-256 of it): an option letter when the prompt lists
options ("A." ... "D."), a signed angle when it asks for a direction, a distance otherwise, sometimes
wrapped in a sentence, sometimes unreadable, so that the scores differ from column to column.
Usage: harness_stub_server.py PORT  (prints "listening on PORT" once it is serving; stops on SIGTERM).
"""

import hashlib
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def prompt_text(body):
    texts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(part.get("text", "") for part in content if part.get("type") == "text")
    return "\n".join(texts)


def answer(text):
    digest = int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16)
    style = digest % 5
    if "A." in text and "B." in text:
        letter = "ABCD"[(digest >> 8) % 4]
        return [letter, "The answer is (%s)." % letter, "<answer>%s</answer>" % letter, letter, "I am not sure."][style]
    if "<point>" in text or "coordinate" in text.lower():
        x, y = (digest >> 8) % 1000, (digest >> 20) % 1000
        return ["<point>%d %d</point>" % (x, y), "(%d, %d)" % (x, y), "x=%d, y=%d" % (x, y), "no idea", "<point>%d %d</point>" % (x, y)][style]
    if "degree" in text.lower() or "direction" in text.lower():
        angle = (digest >> 8) % 361 - 180
        return ["%d" % angle, "About %d degrees." % angle, "%d°" % angle, "left", "Answer: %d" % angle][style]
    metres = 0.5 + ((digest >> 8) % 90) / 10.0
    return ["%.1f" % metres, "about %.0f cm" % (metres * 100), "%.1f meters" % metres, "far", "Answer: %.1f" % metres][style]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, status, payload):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "gst-stub", "object": "model", "owned_by": "gst"}]})
        else:
            self._send(404, {"error": {"message": "not found: %s" % self.path}})

    def do_POST(self):  # noqa: N802
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found: %s" % self.path}})
            return
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        reply = answer(prompt_text(body))
        self._send(200, {
            "id": "chatcmpl-gst-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "gst-stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(reply.split()), "completion_tokens": len(reply.split()),
                      "total_tokens": 2 * len(reply.split())},
        })


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("listening on %d" % port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
