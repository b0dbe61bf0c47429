// The Restate service of bench/peers (TypeScript SDK, run as plain JavaScript): handlers
// w1 (1,000 sequential ctx.run), w2 (1,000 ctx.run at once, RestatePromise.all) and w3
// (10 layers of 100 ctx.run at once, each layer waiting for the one before). Each ctx.run
// is a journal entry the server makes durable before the handler goes on.
//
// Usage: node peer_restate.mjs PORT DIR [W4-child]. With W4-child, step 900 of w1 writes
// DIR/restate-w4.ready and never returns, unless that file is already there (the endpoint
// started after the kill finishes the run). The driver (peers.py) runs the server, registers
// this endpoint, invokes the handlers over HTTP and times them.
import * as fs from "node:fs";
import * as path from "node:path";

// The SDK calls Promise.withResolvers (Node 22); this machine has Node 20.
Promise.withResolvers ??= () => {
  let resolve, reject;
  const promise = new Promise((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
};
const restate = await import("@restatedev/restate-sdk");

const [port, dir, mode] = process.argv.slice(2);
const marker = path.join(dir, "restate-w4.ready");
const holdAt900 = mode === "W4-child" && !fs.existsSync(marker);

const noop = (i) => async () => {
  if (i === 900 && holdAt900) {
    fs.writeFileSync(marker, "ready");
    await new Promise(() => {});
  }
  return i;
};

const bench = restate.service({
  name: "bench",
  handlers: {
    w1: async (ctx, n) => {
      for (let i = 0; i < n; i++) await ctx.run("noop", noop(i));
      return n;
    },
    w2: async (ctx, n) => {
      const all = [];
      for (let i = 0; i < n; i++) all.push(ctx.run("noop", noop(i)));
      return (await restate.RestatePromise.all(all)).length;
    },
    w3: async (ctx, layers) => {
      let done = 0;
      for (let l = 0; l < layers; l++) {
        const all = [];
        for (let i = 0; i < 100; i++) all.push(ctx.run("noop", noop(i)));
        done += (await restate.RestatePromise.all(all)).length;
      }
      return done;
    },
  },
});

restate.serve({ services: [bench], port: Number(port) });
