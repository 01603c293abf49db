// A scripted HTTP server on loopback: answers each request with the next scripted reply and
// records what it received. Real sockets and a real HTTP exchange, for the retry rules; the
// interop suite checks the same rules against a real wharf.
import { createServer } from "node:http";

export async function scripted(replies) {
  const queue = [...replies];
  const received = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      const reply = queue.shift() ?? { status: 500, body: { code: "script-ended" } };
      if (reply.drop) {
        req.socket.destroy();
        return;
      }
      const data = Buffer.isBuffer(reply.body) ? reply.body : Buffer.from(JSON.stringify(reply.body ?? {}));
      res.writeHead(reply.status, { ...(reply.headers ?? {}), "content-length": data.length });
      res.end(data);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    received,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

export const decided = (outcome, reason, ack, status = 200, extra = {}) => ({
  status,
  body: { outcome, reason, correlation_id: "c-1", acknowledged_sequence: ack, ...extra },
});

export const error = (status, code, reason, headers = {}) => ({
  status,
  body: { code, reason, correlation_id: "c-1" },
  headers,
});
