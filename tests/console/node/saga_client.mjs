// A small saga API client for Node.js (18+: global fetch), written against the console's
// OpenAPI document: it reads /api/v1/openapi.json and calls the operations it finds there
// (the start operation is POST on the collection, the read is GET on the item path).
//
// Usage: node saga_client.mjs <console URL> <token> <command> [args...]
//   start <record_id> <user_id> [input JSON]   -> {"status", "location", "body"}
//   get <record_id>                             -> {"status", "body"}
//   burst <n> <record prefix> <user_id>         -> {"statuses": [...], "retry_after"}
// One JSON line on stdout; exit 0 when every call answered (whatever the status).

const [base, token, command, ...args] = process.argv.slice(2);

async function api() {
  const res = await fetch(new URL("/api/v1/openapi.json", base));
  if (!res.ok) throw new Error(`openapi.json: ${res.status}`);
  const doc = await res.json();
  const prefix = doc.servers[0].url;
  const start = Object.entries(doc.paths).find(([, ops]) => ops.post && ops.post.responses["201"]);
  const item = Object.keys(doc.paths).find((p) => p === `${start[0]}/{record_id}`);
  if (!start || !item || !doc.paths[item].get) throw new Error("no start/read operations");
  const body = start[1].post.requestBody.content["application/json"].schema;
  return { prefix, startPath: start[0], itemPath: item, required: body.required };
}

function headers() {
  return { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
}

async function startSaga(ops, recordId, userId, input) {
  const body = { record_id: recordId, user_id: userId };
  if (input !== undefined) body.input = input;
  for (const name of ops.required) if (!(name in body)) throw new Error(`missing ${name}`);
  const res = await fetch(new URL(ops.prefix + ops.startPath, base), {
    method: "POST", headers: headers(), body: JSON.stringify(body),
  });
  return { status: res.status, location: res.headers.get("location"),
           retry_after: res.headers.get("retry-after"), body: await res.json() };
}

async function getSaga(ops, recordId) {
  const path = ops.itemPath.replace("{record_id}", encodeURIComponent(recordId));
  const res = await fetch(new URL(ops.prefix + path, base), { headers: headers() });
  return { status: res.status, body: await res.json() };
}

const ops = await api();
let out;
if (command === "start") {
  out = await startSaga(ops, args[0], args[1], args[2] ? JSON.parse(args[2]) : undefined);
} else if (command === "get") {
  out = await getSaga(ops, args[0]);
} else if (command === "burst") {
  const statuses = [];
  let retryAfter = null;
  for (let i = 0; i < Number(args[0]); i++) {
    const r = await startSaga(ops, `${args[1]}-${i}`, args[2]);
    statuses.push(r.status);
    if (r.status === 429) retryAfter = r.retry_after;
  }
  out = { statuses, retry_after: retryAfter };
} else {
  console.error(`unknown command ${command}`);
  process.exit(2);
}
console.log(JSON.stringify(out));
