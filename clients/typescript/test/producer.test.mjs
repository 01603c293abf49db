// The producer's retry rules and state file (docs/protocol.md §5–§7), over real HTTP to a
// scripted server.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { BuildError, ExhaustedError, Producer, RefusedError, verify } from "../dist/index.js";
import { decided, error, scripted } from "./scripted.mjs";

const SEED = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
const PAYLOAD = { producer_id: "p", acknowledged_sequence: 0, acknowledged_event_id: null, version: 1 };

async function producer(url, statePath, overrides = {}) {
  const sleeps = [];
  const p = await Producer.open(
    { baseUrl: url, tenant: "acme", project: "p1", token: "wharf_t", keyId: "k1", seed: SEED, ...overrides },
    { ...(statePath ? { statePath } : {}), sleep: async (ms) => { sleeps.push(ms); } },
  );
  return { p, sleeps };
}

async function withServer(replies, f) {
  const server = await scripted(replies);
  try {
    return await f(server);
  } finally {
    await server.close();
  }
}

async function tempDir(t) {
  const dir = await mkdtemp(join(tmpdir(), "wharf-client-test-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test("an accepted envelope is sent once, signed, and forgotten", async (t) => {
  const dir = await tempDir(t);
  await withServer([decided("accept-delayed", "in-order", 1)], async (server) => {
    const { p, sleeps } = await producer(server.url, join(dir, "state.json"));
    const e = await p.build("sync_cursor", PAYLOAD);
    assert.deepEqual(p.pending().map((x) => x.producer_sequence), [1]);
    const answer = await p.send(e);
    assert.deepEqual(
      [answer.outcome, answer.reason, answer.acknowledgedSequence, answer.attempts, answer.acknowledged, answer.httpStatus],
      ["accept-delayed", "in-order", 1, 1, true, 200],
    );
    const [request] = server.received;
    assert.equal(request.path, "/v1/tenants/acme/projects/p1/envelopes");
    assert.equal(request.headers.authorization, "Bearer wharf_t");
    assert.equal(verify(JSON.parse(request.body), p.publicKey()), "rfc8785");
    assert.deepEqual([p.pending(), p.acknowledgedSequence, p.nextSequence, sleeps], [[], 1, 2, []]);
  });
});

for (const status of [502, 503, 504]) {
  test(`HTTP ${status} and a reset are retried with the same bytes`, async () => {
    const replies = [
      error(status, "unavailable", "database"),
      { drop: true },
      decided("ignore-duplicate", "duplicate", 1, 200, { original: { outcome: "accept-delayed", correlation_id: "c-0" } }),
    ];
    await withServer(replies, async (server) => {
      const { p, sleeps } = await producer(server.url);
      const answer = await p.send(await p.build("sync_cursor", PAYLOAD));
      assert.equal(answer.attempts, 3);
      assert.equal(answer.outcome, "ignore-duplicate");
      assert.deepEqual(answer.original, { outcome: "accept-delayed", correlationId: "c-0" });
      assert.equal(new Set(server.received.map((r) => r.body.toString())).size, 1, "a retry changed the bytes");
      assert.equal(sleeps.length, 2);
      assert.ok(sleeps[0] >= 160 && sleeps[0] <= 240, String(sleeps[0]));
      assert.ok(sleeps[1] >= 320 && sleeps[1] <= 480, String(sleeps[1]));
    });
  });
}

test("429 waits for Retry-After, capped", async () => {
  const replies = [
    error(429, "rate-limited", "identity-limited", { "retry-after": "3" }),
    error(429, "rate-limited", "identity-limited", { "retry-after": "3600" }),
    decided("accept-delayed", "in-order", 1),
  ];
  await withServer(replies, async (server) => {
    const { p, sleeps } = await producer(server.url, undefined, { retryAfterMaxMs: 60_000 });
    const answer = await p.send(await p.build("sync_cursor", PAYLOAD));
    assert.equal(answer.attempts, 3);
    assert.deepEqual(sleeps, [3000, 60_000]);
  });
});

test("exhaustion reports the last status and keeps the envelope", async (t) => {
  const dir = await tempDir(t);
  const replies = Array(3).fill(error(429, "rate-limited", "peer-limited", { "retry-after": "2" }));
  await withServer(replies, async (server) => {
    const { p, sleeps } = await producer(server.url, join(dir, "s.json"), { attemptsMax: 3 });
    const e = await p.build("sync_cursor", PAYLOAD);
    await assert.rejects(p.send(e), (x) => x instanceof ExhaustedError && x.attempts === 3 && x.status === 429 && x.retryAfterS === 2);
    assert.equal(server.received.length, 3);
    assert.equal(sleeps.length, 2);
    assert.deepEqual(p.pending(), [e]);
  });
});

test("an unreachable server exhausts attempts", async () => {
  const server = await scripted([]);
  await server.close();
  const { p, sleeps } = await producer(server.url, undefined, { attemptsMax: 2 });
  await assert.rejects(p.send(await p.build("sync_cursor", PAYLOAD)), (x) => x instanceof ExhaustedError && x.status === undefined && x.last.startsWith("transport"));
  assert.equal(sleeps.length, 1);
});

for (const [reply, code] of [
  [error(401, "unauthenticated", "unauthenticated", { "www-authenticate": "Bearer" }), "unauthenticated"],
  [error(413, "payload-too-large", "body-too-large"), "payload-too-large"],
  [error(400, "bad-request", "body-unreadable"), "bad-request"],
  [{ status: 307, body: Buffer.alloc(0), headers: { location: "http://127.0.0.1:9/elsewhere" } }, "unknown"],
]) {
  test(`HTTP ${reply.status} refuses the request, is not retried, keeps the envelope`, async () => {
    await withServer([reply, decided("accept-delayed", "in-order", 1)], async (server) => {
      const { p, sleeps } = await producer(server.url);
      const e = await p.build("sync_cursor", PAYLOAD);
      await assert.rejects(p.send(e), (x) => x instanceof RefusedError && x.status === reply.status && x.code === code);
      assert.equal(server.received.length, 1);
      assert.deepEqual(sleeps, []);
      assert.deepEqual(p.pending(), [e]);
    });
  });
}

for (const [reply, outcome] of [
  [decided("refuse-replay", "replay", 5, 409), "refuse-replay"],
  [decided("refuse-tampered", "identity-conflict", 5, 422), "refuse-tampered"],
  [decided("refuse-incompatible", "event-type", 5, 422), "refuse-incompatible"],
]) {
  test(`${outcome} is an answer and never retried`, async () => {
    await withServer([reply], async (server) => {
      const { p, sleeps } = await producer(server.url);
      const answer = await p.send(await p.build("sync_cursor", PAYLOAD));
      assert.deepEqual([answer.outcome, answer.acknowledged, answer.httpStatus, answer.acknowledgedSequence], [outcome, false, reply.status, 5]);
      assert.equal(server.received.length, 1);
      assert.deepEqual(sleeps, []);
      assert.deepEqual(p.pending(), []);
    });
  });
}

test("an unreadable decided answer keeps the envelope", async () => {
  await withServer([{ status: 200, body: Buffer.from("<html>proxy</html>") }], async (server) => {
    const { p } = await producer(server.url);
    const e = await p.build("sync_cursor", PAYLOAD);
    await assert.rejects(p.send(e), ExhaustedError);
    assert.deepEqual(p.pending(), [e]);
  });
});

test("a batch answers per envelope and one cursor", async (t) => {
  const dir = await tempDir(t);
  const results = {
    correlation_id: "c-b",
    acknowledged_sequence: 3,
    results: [
      { index: 0, outcome: "accept-delayed", reason: "gap", event_id: "x", producer_sequence: 3 },
      { index: 1, outcome: "accept-delayed", reason: "in-order", event_id: "y", producer_sequence: 2 },
      { index: 2, outcome: "refuse-tampered", reason: "payload" },
    ],
  };
  await withServer([error(503, "unavailable", "database"), { status: 200, body: results }], async (server) => {
    const { p } = await producer(server.url, join(dir, "s.json"));
    const one = await p.build("sync_cursor", PAYLOAD);
    const two = await p.build("sync_cursor", PAYLOAD);
    const three = await p.build("sync_cursor", PAYLOAD);
    const answer = await p.sendBatch([three, two, one]);
    assert.ok(server.received[0].path.endsWith("/envelopes:batch"));
    assert.deepEqual(server.received[0].body, server.received[1].body);
    assert.deepEqual(JSON.parse(server.received[1].body).envelopes.map((e) => e.producer_sequence), [3, 2, 1]);
    assert.deepEqual([answer.acknowledgedSequence, answer.attempts], [3, 2]);
    assert.deepEqual(answer.items.map((i) => [i.index, i.outcome, i.reason, i.acknowledged]), [
      [0, "accept-delayed", "gap", true],
      [1, "accept-delayed", "in-order", true],
      [2, "refuse-tampered", "payload", false],
    ]);
    assert.equal(answer.items[2].eventId, undefined);
    assert.deepEqual([p.pending(), p.acknowledgedSequence], [[], 3]);
  });
});

test("a batch refused as a whole is an error", async () => {
  await withServer([decided("refuse-tampered", "payload", 0, 422)], async (server) => {
    const { p } = await producer(server.url);
    const e = await p.build("sync_cursor", PAYLOAD);
    await assert.rejects(p.sendBatch([e]), (x) => x instanceof RefusedError && x.status === 422 && x.code === "refuse-tampered" && x.reason === "payload" && x.acknowledgedSequence === 0);
    assert.deepEqual(p.pending(), [e]);
  });
});

test("the state file survives a restart and resends the same bytes", async (t) => {
  const dir = await tempDir(t);
  const state = join(dir, "sub", "state.json");
  const { p } = await producer("http://127.0.0.1:9", state);
  const first = await p.build("sync_cursor", PAYLOAD);
  const second = await p.build("sync_cursor", PAYLOAD, { idempotencyKey: "second" });
  await withServer([decided("accept-delayed", "in-order", 1), decided("accept-delayed", "in-order", 2)], async (server) => {
    const { p: again } = await producer(server.url, state);
    assert.equal(again.nextSequence, 3);
    assert.deepEqual(again.pending(), [first, second]);
    const answers = await again.resendPending();
    const third = await again.build("sync_cursor", PAYLOAD);
    assert.deepEqual(answers.map((a) => a.acknowledgedSequence), [1, 2]);
    assert.deepEqual(server.received.map((r) => JSON.parse(r.body)), [first, second]);
    assert.equal(third.producer_sequence, 3);
    const { p: reloaded } = await producer("http://127.0.0.1:9", state);
    assert.deepEqual([reloaded.acknowledgedSequence, reloaded.pending()], [2, [third]]);
  });
  assert.deepEqual((await readdir(join(dir, "sub"))).filter((f) => f.endsWith(".tmp")), []);
});

test("concurrent builds never share a sequence and the file keeps the last state", async (t) => {
  const dir = await tempDir(t);
  const state = join(dir, "state.json");
  const { p } = await producer("http://127.0.0.1:9", state);
  const built = await Promise.all(Array.from({ length: 20 }, () => p.build("sync_cursor", PAYLOAD)));
  assert.deepEqual(built.map((e) => e.producer_sequence).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i + 1));
  const { p: reloaded } = await producer("http://127.0.0.1:9", state);
  assert.equal(reloaded.nextSequence, 21);
  assert.equal(reloaded.pending().length, 20);
});

test("a state file of another stream or format is refused", async (t) => {
  const dir = await tempDir(t);
  const state = join(dir, "state.json");
  const { p } = await producer("http://127.0.0.1:9", state);
  await p.build("sync_cursor", PAYLOAD);
  await assert.rejects(producer("http://127.0.0.1:9", state, { project: "other" }), BuildError);
  await writeFile(state, "{not json");
  await assert.rejects(producer("http://127.0.0.1:9", state), BuildError);
});

test("a bad envelope uses no sequence, and pending is bounded", async () => {
  const { p } = await producer("http://127.0.0.1:9", undefined, { pendingMax: 2 });
  await assert.rejects(p.build("Not-A-Type", PAYLOAD), BuildError);
  await assert.rejects(p.build("sync_cursor", { ratio: 0.5 }), BuildError);
  assert.equal(p.nextSequence, 1);
  await p.build("sync_cursor", PAYLOAD);
  await p.build("sync_cursor", PAYLOAD);
  await assert.rejects(p.build("sync_cursor", PAYLOAD), BuildError);
  assert.equal(p.nextSequence, 3);
});

test("setup refuses bad identities and seeds", async () => {
  for (const tenant of ["", "a/b", "acme/../x"]) await assert.rejects(producer("http://x", undefined, { tenant }), BuildError);
  for (const seed of [Buffer.from("short"), "not base64!"]) await assert.rejects(producer("http://x", undefined, { seed }), BuildError);
});
