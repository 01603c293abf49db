#!/usr/bin/env node
// Graphile Worker baseline for wharf's outbox drain benchmark (bench/README.md).
//
// Owns: one measured run of Graphile Worker on the database in DATABASE_URL — migrate its schema,
// bulk-add N no-op jobs, drain them with a runner of the given concurrency, print ONE JSON line on
// stdout. Must not know: anything of wharf. It never touches a schema other than graphile_worker.
//
// What is measured, and why it matches `wharf bench outbox`:
// - enqueue_seconds: N jobs added through Graphile's own bulk API (WorkerUtils.addJobs, which is
//   one `graphile_worker.add_jobs(job_spec[])` statement per call), --batch jobs per call, one
//   call at a time on one connection. wharf's side uses `enqueue_many` with the same batch size,
//   also one statement per batch on one connection.
// - drain_seconds: from just before `run()` (pool connect, LISTEN and the first fetch included,
//   as wharf's executor start is) until the database shows none of the N jobs left. The handler
//   returning is not the end: Graphile completes a job after the handler resolves, so the end is
//   observed in the database, exactly as wharf's side waits for every action to have ended.
// - Graphile runs as it does by default (LISTEN/NOTIFY wake-ups plus a 2 s poll, no local queue,
//   no batched completion); --local-queue-size and --complete-batch-delay switch on its batching
//   for a best-case run. Success logging is off (NO_LOG_SUCCESS) and the logger drops info/debug,
//   so the baseline does not pay for writing a line per job to a terminal.
//
// Bounds: every wait has a deadline (--timeout-seconds for the whole run); on expiry the harness
// prints an error to stderr and exits 2. It always exits by itself once the jobs are done.

import { parseArgs } from "node:util";
import { createRequire } from "node:module";

// Read once at module load by graphile-worker, so it must be set before the import below.
process.env.NO_LOG_SUCCESS = "1";
const { Logger, makeWorkerUtils, run } = await import("graphile-worker");
const require = createRequire(import.meta.url);
const GRAPHILE_VERSION = require("graphile-worker/package.json").version;

const TASK = "wharf_bench_noop";
// Matches wharf's ENQUEUE_BATCH_MAX (10 000 requests per enqueue_many); a larger batch would
// only make one add_jobs call carry megabytes of JSON.
const BATCH_MAX = 10_000;
// How often the end of the drain is checked once every handler has run. Short, because it adds
// up to this much to drain_seconds; it only starts after the last handler, so it costs nothing
// while jobs are running.
const DONE_POLL_MS = 2;

const USAGE = `usage: DATABASE_URL=postgres://… node drain.mjs --n N --concurrency C [options]

  --n N                     jobs to add and drain (required, 1..100000000)
  --concurrency C           Graphile runner concurrency (required, 1..1000)
  --batch B                 jobs per add_jobs call [1000]
  --queues Q                spread jobs round-robin over Q named queues (Graphile's lanes);
                            0 = no queue_name, jobs run in any order [0]
  --max-pool-size P         pg pool size [max(10, C + 2)]
  --local-queue-size S      Graphile localQueue.size; -1 = off, Graphile's default [-1]
  --complete-batch-delay D  Graphile completeJobBatchDelay in ms; -1 = off, the default [-1]
  --timeout-seconds T       give up (exit 2) after this long [600]
  --database-url URL        instead of DATABASE_URL
  --keep                    keep leftover jobs of earlier runs instead of deleting them`;

function die(message, code = 2) {
    console.error(`drain.mjs: ${message}`);
    process.exit(code);
}

function int(args, name, fallback, min, max) {
    const raw = args[name];
    if (raw === undefined) {
        if (fallback === undefined) die(`--${name} is required\n${USAGE}`);
        return fallback;
    }
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
        die(`--${name} must be an integer in ${min}..${max}, not ${JSON.stringify(raw)}`);
    }
    return value;
}

const { values: args } = parseArgs({
    options: {
        n: { type: "string" },
        concurrency: { type: "string" },
        batch: { type: "string" },
        queues: { type: "string" },
        "max-pool-size": { type: "string" },
        "local-queue-size": { type: "string" },
        "complete-batch-delay": { type: "string" },
        "timeout-seconds": { type: "string" },
        "database-url": { type: "string" },
        keep: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
});
if (args.help) {
    console.log(USAGE);
    process.exit(0);
}
const n = int(args, "n", undefined, 1, 100_000_000);
const concurrency = int(args, "concurrency", undefined, 1, 1000);
const batch = int(args, "batch", 1000, 1, BATCH_MAX);
const queues = int(args, "queues", 0, 0, 10_000_000);
const maxPoolSize = int(args, "max-pool-size", Math.max(10, concurrency + 2), 1, 2000);
const localQueueSize = int(args, "local-queue-size", -1, -1, 100_000);
const completeBatchDelay = int(args, "complete-batch-delay", -1, -1, 60_000);
const timeoutSeconds = int(args, "timeout-seconds", 600, 1, 86_400);
const connectionString = args["database-url"] ?? process.env.DATABASE_URL;
if (!connectionString) die(`DATABASE_URL is not set\n${USAGE}`);

// The whole run has one deadline, so a stuck drain (a job that keeps failing, a lost
// connection) ends the process instead of hanging a comparison run.
const deadline = setTimeout(() => {
    die(`gave up after ${timeoutSeconds} s (drained ${completedHandlers} of ${n} handlers)`);
}, timeoutSeconds * 1000);
deadline.unref();

// Graphile logs every poll and every job at info level; keep errors and warnings only.
const logger = new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(`graphile-worker ${level}: ${message}`);
});

const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;

const utils = await makeWorkerUtils({ connectionString, logger });
let completedHandlers = 0;
try {
    // 1. Schema, and a clean start: leftovers of an aborted earlier run would be drained too and
    //    flatter or spoil the figure. VACUUM so each round starts from the same table state as the
    //    wharf side does (it vacuums wharf.action the same way).
    await utils.migrate();
    const leftover = await utils.withPgClient(async (client) => {
        const { rows } = await client.query(
            `select count(*)::bigint as n from graphile_worker._private_jobs j
               join graphile_worker._private_tasks t on t.id = j.task_id
              where t.identifier = $1`,
            [TASK],
        );
        return Number(rows[0].n);
    });
    if (leftover > 0) {
        if (args.keep) die(`${leftover} ${TASK} jobs are left from an earlier run (drop --keep to delete them)`);
        await utils.withPgClient((client) =>
            client.query(
                `delete from graphile_worker._private_jobs j using graphile_worker._private_tasks t
                  where t.id = j.task_id and t.identifier = $1`,
                [TASK],
            ),
        );
    }
    await utils.withPgClient((client) => client.query("vacuum graphile_worker._private_jobs"));

    // 2. Enqueue through Graphile's bulk API, one batch per statement.
    const payload = {};
    const enqueueStart = process.hrtime.bigint();
    for (let first = 0; first < n; first += batch) {
        const count = Math.min(batch, n - first);
        const specs = new Array(count);
        for (let i = 0; i < count; i++) {
            const spec = { identifier: TASK, payload };
            if (queues > 0) spec.queueName = `q${(first + i) % queues}`;
            specs[i] = spec;
        }
        await utils.addJobs(specs);
    }
    const enqueueSeconds = seconds(enqueueStart);
    // Fresh planner statistics for the table that just grew from nothing, as a long-running
    // system would have; the wharf side analyzes wharf.action at the same point.
    await utils.withPgClient((client) => client.query("analyze graphile_worker._private_jobs"));

    // 3. Drain. The handler only counts; completion is Graphile's own work.
    let allHandled;
    const handled = new Promise((resolve) => (allHandled = resolve));
    const drainStart = process.hrtime.bigint();
    const runner = await run({
        connectionString,
        concurrency,
        maxPoolSize,
        logger,
        noHandleSignals: true,
        // Graphile's batching knobs exist only as preset options, not as run() options.
        preset: {
            worker: {
                ...(localQueueSize > 0 ? { localQueue: { size: localQueueSize } } : {}),
                ...(completeBatchDelay >= 0 ? { completeJobBatchDelay: completeBatchDelay } : {}),
            },
        },
        taskList: {
            [TASK]: async () => {
                completedHandlers += 1;
                if (completedHandlers >= n) allHandled();
            },
        },
    });
    await handled;
    // Every handler ran; wait until their completions are committed.
    const remainingSql = `select count(*)::bigint as n from graphile_worker._private_jobs j
                            join graphile_worker._private_tasks t on t.id = j.task_id
                           where t.identifier = $1`;
    for (;;) {
        const remaining = await utils.withPgClient(async (client) => {
            const { rows } = await client.query(remainingSql, [TASK]);
            return Number(rows[0].n);
        });
        if (remaining === 0) break;
        await new Promise((resolve) => setTimeout(resolve, DONE_POLL_MS));
    }
    const drainSeconds = seconds(drainStart);
    await runner.stop();

    console.log(
        JSON.stringify({
            system: "graphile-worker",
            version: GRAPHILE_VERSION,
            n,
            concurrency,
            enqueue_seconds: round(enqueueSeconds),
            drain_seconds: round(drainSeconds),
            jobs_per_second: round(n / drainSeconds),
            enqueue_per_second: round(n / enqueueSeconds),
            batch,
            queues,
            max_pool_size: maxPoolSize,
            local_queue_size: localQueueSize,
            complete_batch_delay_ms: completeBatchDelay,
            node: process.versions.node,
        }),
    );
} finally {
    await utils.release();
}
clearTimeout(deadline);
// Graphile's pool and timers are released above; exit explicitly anyway so a stray handle in a
// dependency can never keep a comparison run waiting.
process.exit(0);

function round(x) {
    return Math.round(x * 1000) / 1000;
}
