// The TypeScript client against a real `wharf serve` (clients/ci.sh starts it and sets the
// INTEROP_* variables). Every expectation here is a statement of docs/protocol.md.
//
// Each test issues its own credential, so each has its own stream and its own identity-limiter
// bucket (the server runs with a burst of INTEROP_IDENTITY_BURST envelopes).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import * as wharf from "../dist/index.js";

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the interop suite through clients/ci.sh`);
  return value;
}

const URL = need("INTEROP_URL");
const OPERATOR = need("INTEROP_OPERATOR_TOKEN");
const WHARF = need("INTEROP_WHARF");
const TENANT = need("INTEROP_TENANT");
const PROJECT = need("INTEROP_PROJECT");
const KEY_ID = need("INTEROP_KEY_ID");
const SEED = need("INTEROP_SEED");
const WEBHOOK_KEY = need("INTEROP_WEBHOOK_KEY");
const BURST = Number(need("INTEROP_IDENTITY_BURST"));
/** Every wait in this suite ends by this many milliseconds. */
const WAIT_MS_MAX = 60_000;
const CURSOR = { producer_id: "ts", acknowledged_sequence: 0, acknowledged_event_id: null, version: 1 };

const issue = (account) =>
  execFileSync(WHARF, ["credential", "issue", "--tenant", TENANT, "--account", account], {
    encoding: "utf8",
    timeout: WAIT_MS_MAX,
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();

async function tempDir(t) {
  const dir = await mkdtemp(join(tmpdir(), "wharf-interop-ts-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function producer(t, name, overrides = {}, token) {
  const dir = await tempDir(t);
  const config = {
    baseUrl: URL,
    tenant: TENANT,
    project: PROJECT,
    token: token ?? issue(`ts-${name}-${randomBytes(4).toString("hex")}`),
    keyId: KEY_ID,
    seed: SEED,
    ...overrides,
  };
  return wharf.Producer.open(config, { statePath: join(dir, `${name}.json`) });
}

async function rawPost(url, body, token) {
  const response = await fetch(url, {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    signal: AbortSignal.timeout(WAIT_MS_MAX),
  });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

const resign = (e, changes = {}) => wharf.sign({ ...e, ...changes }, wharf.privateKey(SEED), KEY_ID);
const fresh = (key) => ({ event_id: wharf.newEventId(), idempotency_key: key });

test("accept, duplicate, gap then fill", async (t) => {
  const p = await producer(t, "sequence");
  const [e1, e2, e3] = [await p.build("sync_cursor", CURSOR), await p.build("sync_cursor", CURSOR), await p.build("sync_cursor", CURSOR)];

  const first = await p.send(e1);
  assert.deepEqual([first.outcome, first.reason, first.acknowledgedSequence, first.httpStatus], ["accept-delayed", "in-order", 1, 200]);

  const again = await p.send(e1);
  assert.deepEqual([again.outcome, again.reason, again.acknowledgedSequence], ["ignore-duplicate", "duplicate", 1]);
  assert.deepEqual(again.original, { outcome: "accept-delayed", correlationId: first.correlationId });

  const gap = await p.send(e3);
  assert.deepEqual([gap.outcome, gap.reason, gap.acknowledgedSequence], ["accept-delayed", "gap", 1]);

  const fill = await p.send(e2);
  assert.deepEqual([fill.outcome, fill.reason, fill.acknowledgedSequence], ["accept-delayed", "in-order", 3]);
  assert.deepEqual([p.pending(), p.acknowledgedSequence], [[], 3]);

  // Re-signed by the same key, still a duplicate: the content digest leaves integrity out.
  const copy = await p.send(resign(e3));
  assert.deepEqual([copy.outcome, copy.acknowledgedSequence], ["ignore-duplicate", 3]);
});

test("a batch is decided in order with one cursor", async (t) => {
  const p = await producer(t, "batch");
  const [e1, e2, e3, e4] = [
    await p.build("sync_cursor", CURSOR),
    await p.build("sync_cursor", CURSOR),
    await p.build("sync_cursor", CURSOR),
    await p.build("sync_cursor", CURSOR),
  ];
  const answer = await p.sendBatch([e2, e1, e1, e4]);
  assert.equal(answer.acknowledgedSequence, 2);
  assert.deepEqual(answer.items.map((i) => [i.index, i.outcome, i.reason, i.producerSequence]), [
    [0, "accept-delayed", "gap", 2],
    [1, "accept-delayed", "in-order", 1],
    [2, "ignore-duplicate", "duplicate", 1],
    [3, "accept-delayed", "gap", 4],
  ]);
  assert.equal(answer.items[2].original.correlationId, answer.correlationId);

  const fill = await p.sendBatch([e3]);
  assert.equal(fill.acknowledgedSequence, 4);
  assert.deepEqual(fill.items.map((i) => [i.outcome, i.reason]), [["accept-delayed", "in-order"]]);

  const whole = await rawPost(p.batchUrl, '{"envelopes":[]}', p.config.token);
  assert.deepEqual([whole.status, whole.body.outcome, whole.body.reason, whole.body.acknowledged_sequence], [422, "refuse-tampered", "payload", 4]);
  await assert.rejects(p.sendBatch([]), (e) => e instanceof wharf.RefusedError && e.status === 422 && e.reason === "payload" && e.acknowledgedSequence === 4);
});

test("tampered and other refusals store nothing", async (t) => {
  const p = await producer(t, "tampered");
  const e1 = await p.build("sync_cursor", CURSOR);

  const tampered = { ...e1, payload: { ...CURSOR, version: 2 } };
  const refused = await p.send(tampered);
  assert.deepEqual([refused.outcome, refused.reason, refused.acknowledgedSequence, refused.httpStatus], ["refuse-tampered", "signature", 0, 422]);

  const accepted = await p.send(e1);
  assert.deepEqual([accepted.outcome, accepted.reason, accepted.acknowledgedSequence], ["accept-delayed", "in-order", 1]);

  const next = (key, changes = {}) => resign(e1, { producer_sequence: 2, ...fresh(key), ...changes });
  const rows = [
    ["the same sequence with other content", resign(e1, fresh("other")), "refuse-tampered", "identity-conflict"],
    ["the same idempotency key with other content", resign(e1, { producer_sequence: 2, event_id: wharf.newEventId() }), "refuse-tampered", "identity-conflict"],
    ["signed by another key", wharf.sign({ ...e1, producer_sequence: 2, ...fresh("k2") }, wharf.privateKey(Buffer.alloc(32)), KEY_ID), "refuse-tampered", "signature"],
    ["an unknown key id", { ...next("k3"), integrity: { ...e1.integrity, key_id: "no-such-key" } }, "refuse-tampered", "signature"],
    ["another tenant in the envelope", next("k4", { tenant_id: "someone-else" }), "refuse-tampered", "route"],
    ["a payload outside its schema", next("k5", { payload: { ...CURSOR, extra: 1 } }), "refuse-tampered", "payload"],
    ["an unknown event type", next("k6", { event_type: "no_such_type" }), "refuse-incompatible", "event-type"],
    ["schema version 2", next("k7", { schema_version: 2 }), "refuse-incompatible", "schema"],
  ];
  for (const [what, envelope, outcome, reason] of rows) {
    const answer = await p.send(envelope);
    assert.deepEqual([answer.outcome, answer.reason, answer.acknowledgedSequence, answer.httpStatus, answer.attempts], [outcome, reason, 1, 422, 1], what);
  }

  const e2 = await p.build("sync_cursor", CURSOR);
  assert.equal((await p.send(e2)).outcome, "accept-delayed");
  assert.equal(p.acknowledgedSequence, 2);
});

test("401 keeps the envelope for a fixed credential", async (t) => {
  const dir = await tempDir(t);
  const statePath = join(dir, "state.json");
  const config = { baseUrl: URL, tenant: TENANT, project: PROJECT, token: "wharf_" + "A".repeat(43), keyId: KEY_ID, seed: SEED };
  const p = await wharf.Producer.open(config, { statePath });
  const e = await p.build("sync_cursor", CURSOR);
  await assert.rejects(p.send(e), (x) => x instanceof wharf.RefusedError && x.status === 401 && x.code === "unauthenticated" && x.acknowledgedSequence === undefined);
  const raw = await rawPost(p.singleUrl, wharf.wireBytes(e), "nonsense");
  assert.equal(raw.status, 401);
  assert.equal(raw.headers.get("www-authenticate"), "Bearer");
  assert.equal(raw.body.acknowledged_sequence, undefined);
  assert.deepEqual(p.pending(), [e]);

  const fixed = await wharf.Producer.open({ ...config, token: issue(`ts-401-${randomBytes(4).toString("hex")}`) }, { statePath });
  const [answer] = await fixed.resendPending();
  assert.deepEqual([answer.outcome, answer.acknowledgedSequence], ["accept-delayed", 1]);
});

test("429 carries Retry-After and a retry after it passes", async (t) => {
  const dir = await tempDir(t);
  const statePath = join(dir, "limited.json");
  const token = issue(`ts-limited-${randomBytes(4).toString("hex")}`);
  const config = { baseUrl: URL, tenant: TENANT, project: PROJECT, token, keyId: KEY_ID, seed: SEED };
  const p = await wharf.Producer.open({ ...config, attemptsMax: 1 }, { statePath });
  const drain = [];
  for (let i = 0; i < BURST; i++) drain.push(await p.build("sync_cursor", CURSOR));
  assert.equal((await p.sendBatch(drain)).acknowledgedSequence, BURST);
  const e = await p.build("sync_cursor", CURSOR);
  await assert.rejects(p.send(e), (x) => x instanceof wharf.ExhaustedError && x.status === 429 && x.retryAfterS >= 1);
  const raw = await rawPost(p.singleUrl, wharf.wireBytes(e), token);
  assert.deepEqual([raw.status, raw.body.code, raw.body.reason], [429, "rate-limited", "identity-limited"]);
  assert.ok(Number(raw.headers.get("retry-after")) >= 1);
  assert.equal(raw.body.acknowledged_sequence, undefined);
  assert.deepEqual(p.pending(), [e]);

  const patient = await wharf.Producer.open({ ...config, attemptsMax: 5 }, { statePath });
  const started = performance.now();
  const [answer] = await patient.resendPending();
  assert.deepEqual([answer.outcome, answer.reason, answer.acknowledgedSequence], ["accept-delayed", "in-order", BURST + 1]);
  assert.ok(answer.attempts >= 2 && performance.now() - started >= 1000, "it went through without waiting");
});

async function operator(method, path, body, token = OPERATOR) {
  const response = await fetch(URL + path, {
    method,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(WAIT_MS_MAX),
  });
  return { status: response.status, body: await response.json() };
}

/** A receiver on loopback that verifies with the client's verifier: 204 when it verifies, 400 if not. */
async function receiver(verifier) {
  const requests = [];
  let arrived;
  const first = new Promise((resolve) => (arrived = resolve));
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      let status = 204;
      try {
        verifier.verify(req.headers, body);
      } catch (e) {
        if (!(e instanceof wharf.WebhookVerificationError)) throw e;
        status = 400;
      }
      requests.push({ headers: req.headers, body, status });
      res.writeHead(status).end();
      arrived();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/hooks/wharf`,
    requests,
    first,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

test("real webhooks verify and tampering does not", async () => {
  const keys = await operator("GET", "/v1/webhook-keys");
  assert.equal(keys.status, 200);
  assert.deepEqual(keys.body.keys, [{ algorithm: "Ed25519", public_key: WEBHOOK_KEY }], "the endpoint and `webhook-key show` disagree");
  assert.equal((await operator("GET", "/v1/webhook-keys", undefined, null)).status, 401);

  const hook = await receiver(new wharf.WebhookVerifier(keys.body.keys[0].public_key));
  const key = `ts-hook-${randomBytes(8).toString("hex")}`;
  const sentBody = { order: 42, note: "café <&> \u2028 😀", lines: [1, 2, 3] };
  try {
    const enqueued = await operator("POST", "/v1/actions", {
      kind: "webhook",
      tenant_id: TENANT,
      project_id: PROJECT,
      lane_key: "webhook:ts",
      idempotency_key: key,
      payload: { url: hook.url, body: sentBody },
    });
    assert.equal(enqueued.status, 201, JSON.stringify(enqueued.body));
    let timer;
    await Promise.race([
      hook.first,
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error("no webhook arrived")), WAIT_MS_MAX); }),
    ]).finally(() => clearTimeout(timer));
    const deadline = Date.now() + WAIT_MS_MAX;
    for (;;) {
      const { body } = await operator("GET", `/v1/actions/${enqueued.body.id}`);
      if (body.state === "DONE") break;
      assert.ok(Date.now() < deadline, `the action is still ${body.state}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await hook.close();
  }

  const { headers, body, status } = hook.requests[0];
  assert.equal(status, 204, "the receiver's verifier refused a real webhook");
  assert.equal(headers["webhook-id"], key);
  assert.deepEqual(JSON.parse(body), sentBody);
  const verifier = new wharf.WebhookVerifier(WEBHOOK_KEY);
  const ts = Number(headers["webhook-timestamp"]);
  verifier.verify(headers, body, { nowS: ts });
  assert.throws(() => verifier.verify(headers, Buffer.from(body.toString().replace("42", "43")), { nowS: ts }), (e) => e.code === "bad-signature");
  assert.throws(() => verifier.verify(headers, body, { nowS: ts + 301 }), (e) => e.code === "stale-timestamp");
  verifier.verify(headers, body, { nowS: ts + 300 });
  const other = "whpk_" + wharf.publicKeyBytes(wharf.privateKey(Buffer.alloc(32))).toString("base64");
  assert.throws(() => new wharf.WebhookVerifier(other).verify(headers, body, { nowS: ts }), (e) => e.code === "bad-signature");
});
