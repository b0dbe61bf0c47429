//! Streamed chat completions (`stream: true`): the server sends Server-Sent Events, each
//! `data:` line a chunk with a delta of the answer (text, and tool calls in pieces keyed by
//! their index), the last chunks the finish reason and the usage, then `data: [DONE]`.
//!
//! [`Assembler`] reads the bytes as they come (lines may be split anywhere, even inside a
//! UTF-8 character) and puts the chunks back together into the one JSON completion a
//! non-streamed request would have returned, so the rest of the provider reads a single
//! form. Streaming lets the provider tell a slow server (tokens keep coming) from a dead
//! one (nothing for the idle timeout).

use serde_json::{Map, Value, json};

/// Puts a streamed completion back together.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    /// Bytes of a line not complete yet.
    pending: Vec<u8>,
    /// The `data:` lines of the event being read.
    data: String,
    content: String,
    /// Tool calls by their index in the answer: id, name, argument text so far.
    calls: Vec<(String, String, String)>,
    finish: Option<String>,
    usage: Option<Value>,
    done: bool,
    chunks: u64,
}

impl Assembler {
    /// Reads `bytes` of the stream; an error names the chunk that is not JSON.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.pending.extend_from_slice(bytes);
        while let Some(at) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=at).collect();
            let line = String::from_utf8_lossy(&line);
            self.line(line.trim_end_matches(['\n', '\r']))?;
        }
        Ok(())
    }

    /// Returns whether the server said `[DONE]`.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Returns how many chunks were read.
    pub(crate) fn chunks(&self) -> u64 {
        self.chunks
    }

    fn line(&mut self, line: &str) -> Result<(), String> {
        if line.is_empty() {
            return self.dispatch();
        }
        // Comments (`: keep-alive`) and fields other than data are not part of the answer.
        if let Some(data) = line.strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(data.strip_prefix(' ').unwrap_or(data));
        }
        Ok(())
    }

    /// Handles the event whose `data:` lines were read.
    fn dispatch(&mut self) -> Result<(), String> {
        let data = std::mem::take(&mut self.data);
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            format!("stream chunk {} is not JSON ({e}): {}", self.chunks + 1, excerpt(data))
        })?;
        self.chunks += 1;
        if let Some(error) = chunk.get("error") {
            return Err(format!("the server sent an error in the stream: {error}"));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else { return Ok(()) };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else { return Ok(()) };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        for (position, call) in
            delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate()
        {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(position);
            // An index far past the calls so far is a broken stream, not a reason to
            // allocate.
            if index > self.calls.len() + 64 {
                return Err(format!("stream chunk {} names tool call {index}", self.chunks));
            }
            while self.calls.len() <= index {
                self.calls.push(Default::default());
            }
            let slot = &mut self.calls[index];
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                slot.0.push_str(id);
            }
            let function = call.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                slot.1.push_str(name);
            }
            if let Some(args) = function.and_then(|f| f.get("arguments")).and_then(Value::as_str) {
                slot.2.push_str(args);
            }
        }
        Ok(())
    }

    /// Returns the completion as a non-streamed request would have: `choices[0].message`
    /// with the text and tool calls, the finish reason, the usage when the server sent it.
    pub(crate) fn finish(mut self) -> Result<Value, String> {
        // A last event not followed by a blank line still counts.
        if !self.pending.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
            self.line(rest.trim_end_matches(['\n', '\r']))?;
        }
        self.dispatch()?;
        if self.chunks == 0 {
            return Err("the stream ended before its first chunk".into());
        }
        let calls: Vec<Value> = self
            .calls
            .into_iter()
            .filter(|(_, name, _)| !name.is_empty())
            .map(|(id, name, arguments)| {
                json!({ "id": id, "type": "function",
                        "function": { "name": name, "arguments": arguments } })
            })
            .collect();
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert("content".into(), json!(self.content));
        if !calls.is_empty() {
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut completion = json!({
            "choices": [{ "index": 0, "message": message, "finish_reason": self.finish }],
        });
        if let Some(usage) = self.usage {
            completion["usage"] = usage;
        }
        Ok(completion)
    }
}

fn excerpt(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STREAM: &str = concat!(
        ": keep-alive\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Let me \"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"look.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\": \"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"a.txt\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7}}\n\n",
        "data: [DONE]\n\n",
    );

    fn assemble(parts: &[&[u8]]) -> Result<Value, String> {
        let mut a = Assembler::default();
        for part in parts {
            a.push(part)?;
        }
        a.finish()
    }

    #[test]
    fn a_stream_becomes_one_completion() {
        let done = assemble(&[STREAM.as_bytes()]).unwrap();
        let message = &done["choices"][0]["message"];
        assert_eq!(message["content"], "Let me look.");
        assert_eq!(message["tool_calls"][0]["id"], "call_1");
        assert_eq!(message["tool_calls"][0]["function"]["name"], "read_file");
        assert_eq!(message["tool_calls"][0]["function"]["arguments"], "{\"path\": \"a.txt\"}");
        assert_eq!(done["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(done["usage"]["completion_tokens"], 7);
    }

    #[test]
    fn broken_streams_are_errors_that_say_where() {
        let err = assemble(&[b"data: {\"choices\": [\n\n"]).unwrap_err();
        assert!(err.starts_with("stream chunk 1 is not JSON"), "{err}");
        let err = assemble(&[b"data: {\"error\": {\"message\": \"overloaded\"}}\n\n"]).unwrap_err();
        assert!(err.contains("overloaded"), "{err}");
        assert_eq!(
            assemble(&[b": nothing\n\n"]).unwrap_err(),
            "the stream ended before its first chunk"
        );
        let far = b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":999999,\"function\":{\"name\":\"x\"}}]}}]}\n\n";
        assert!(assemble(&[far]).unwrap_err().contains("names tool call 999999"));
    }

    proptest! {
        #[test]
        fn any_split_of_the_bytes_gives_the_same_completion(cuts in prop::collection::vec(0usize..STREAM.len(), 0..12)) {
            let bytes = STREAM.as_bytes();
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut parts = Vec::new();
            let mut from = 0;
            for cut in cuts {
                parts.push(&bytes[from..cut.max(from)]);
                from = cut.max(from);
            }
            parts.push(&bytes[from..]);
            prop_assert_eq!(assemble(&parts).unwrap(), assemble(&[bytes]).unwrap());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = assemble(&[&bytes]);
        }
    }
}
