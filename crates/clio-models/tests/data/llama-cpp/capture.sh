#!/usr/bin/env bash
# Records the answers of a real llama.cpp server that tests/it/recorded.rs replays through
# the OpenAI-compatible provider. Run from the workspace root after `cargo xtask
# test-models` has filled its cache; it serves each model on a loopback port with
# xtask/llama_server.py, as the tier does, sends each request and keeps the body of the answer.
set -euo pipefail
C=${CLIO_TEST_MODELS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clio-test-models}
PY=$C/xllamacpp-2026.10.11549/venv/bin/python
OUT=crates/clio-models/tests/data/llama-cpp
TALLY='[{"type":"function","function":{"name":"tally","description":"Records one tally under a label","parameters":{"type":"object","properties":{"label":{"type":"string"}},"required":["label"],"additionalProperties":false}}}]'
USER_TALLY='{"role":"user","content":"Call the tally tool once with the label \"alpha\"."}'

serve() { # model port [template]
    "$PY" xtask/llama_server.py -m "$C/models/$1" --port "$2" ${3:+--chat-template-file "$3"} >/dev/null 2>&1 &
    pid=$!
    until curl -fs "127.0.0.1:$2/health" >/dev/null; do sleep 0.5; done
}
ask() { # port file body
    curl -fsS "127.0.0.1:$1/v1/chat/completions" -H 'Content-Type: application/json' -d "$3" -o "$OUT/$2"
}

serve SmolLM2-135M-Instruct.Q4_1.gguf 18431
ask 18431 plain.json '{"model":"m","seed":7,"temperature":0,"max_tokens":64,"messages":[{"role":"user","content":"Say hello in five words."}]}'
ask 18431 stream.sse '{"model":"m","seed":7,"temperature":0,"max_tokens":32,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Name three colours."}]}'
ask 18431 length.json '{"model":"m","seed":7,"temperature":0,"max_tokens":8,"messages":[{"role":"user","content":"Write a long story about the sea."}]}'
kill "$pid"

# The tool model writes its call as its whole answer (read with `text_tool_calls`); with a
# chat template whose calls are bare JSON objects, llama.cpp parses the same answer into
# `tool_calls` itself.
serve Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf 18432
ask 18432 text-call.json '{"model":"m","seed":7,"temperature":0,"max_tokens":64,"tools":'"$TALLY"',"messages":['"$USER_TALLY"']}'
kill "$pid"
serve Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf 18433 "$OUT/bare-calls.jinja"
ask 18433 tool-call.json '{"model":"m","seed":7,"temperature":0,"max_tokens":64,"tools":'"$TALLY"',"messages":['"$USER_TALLY"']}'
ask 18433 tool-call.sse '{"model":"m","seed":7,"temperature":0,"max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"tools":'"$TALLY"',"messages":['"$USER_TALLY"']}'
kill "$pid"
