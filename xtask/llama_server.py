"""llama.cpp's HTTP server from the wheel `xllamacpp`, for the real-model tier.

`cargo xtask test-models` runs this with the Python of a venv that holds the pinned wheel
(xtask/src/test_models.rs). The wheel embeds llama.cpp's own C++ server, so this serves the
same OpenAI-compatible endpoints as `llama-server` (`/v1/chat/completions`, `/health`,
`/v1/models`), with jinja chat templates, which turn the request's tools into the prompt and
the model's calls back into `tool_calls`.

    python llama_server.py -m MODEL.gguf --host 127.0.0.1 --port 8080 [--ctx 8192] [--slots 1]

It serves until it is killed (SIGTERM or SIGINT).
"""

import argparse
import os
import signal
import sys
import threading

import xllamacpp


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True, help="the GGUF file to serve")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, required=True, help="the port to listen on")
    parser.add_argument("--ctx", type=int, default=8192, help="the context size, in tokens")
    parser.add_argument("--slots", type=int, default=1, help="requests served at once")
    parser.add_argument("--chat-template-file", help="a jinja chat template to use instead of the model's")
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.slots
    params.use_jinja = True
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as f:
            params.chat_template = f.read()

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The server listens from here until this object is gone.
    server = xllamacpp.Server(params)
    print(f"llama_server.py: listening on {server.listening_address}", flush=True)
    while not stop.wait(0.5):
        pass
    # Tearing the server down can wait on requests in flight; a killed server does not.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
