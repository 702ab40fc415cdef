// An OTLP/HTTP receiver for spec/tracing_spec.lua, checking what arrives
// with the official opentelemetry-proto definitions (the generated root
// of @opentelemetry/otlp-transformer): each POST /v1/traces body is an
// ExportTraceServiceRequest. OTLP/JSON (application/json) is verified,
// encoded to protobuf and decoded back, and every field sent must come
// back with its value (a misspelt or unknown field is refused);
// OTLP/protobuf (application/x-protobuf) is decoded and must encode
// back to the same bytes (an unknown field, a field out of order or a
// varint not minimal is refused). Each decoded span becomes one JSON
// line of OUT, and each request one with its encoding. It is also the local server a handler
// calls: GET /callee records the traceparent it received (and its URL).
//   node receiver.js PORT OUT [ok|500|slow]
//   POST /mode with a body of ok, 500 or slow changes how it answers.
"use strict";
const http = require("http");
const fs = require("fs");
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root");

const [port, out, first] = process.argv.slice(2);
let mode = first || "ok";
const T = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const BYTES = new Set(["traceId", "spanId", "parentSpanId"]);

const line = (o) => fs.appendFileSync(out, JSON.stringify(o) + "\n");

// OTLP/JSON ids are hex: to bytes for protobufjs
function unhex(v, path) {
  if (Array.isArray(v)) return v.map((x, i) => unhex(x, path + "[" + i + "]"));
  if (v === null || typeof v !== "object") return v;
  const o = {};
  for (const [k, x] of Object.entries(v)) {
    if (BYTES.has(k)) {
      if (typeof x !== "string" || !/^([0-9a-f]{2})*$/.test(x))
        throw new Error(path + "." + k + " is not lowercase hex");
      o[k] = Buffer.from(x, "hex");
    } else {
      o[k] = unhex(x, path + "." + k);
    }
  }
  return o;
}

function isDefault(v) {
  return v === 0 || v === "0" || v === "" || v === false ||
    (Array.isArray(v) && v.length === 0);
}

// every field of a (as sent) is in b (as decoded), with its value
function same(a, b, path) {
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length)
      throw new Error(path + ": " + (Array.isArray(b) ? b.length : "no") +
                      " items back for " + a.length);
    a.forEach((x, i) => same(x, b[i], path + "[" + i + "]"));
    return;
  }
  if (Buffer.isBuffer(a)) {
    if (Buffer.from(b).toString("hex") !== a.toString("hex"))
      throw new Error(path + ": bytes differ");
    return;
  }
  if (a !== null && typeof a === "object") {
    for (const [k, x] of Object.entries(a)) {
      if (!(k in (b || {}))) {
        if (isDefault(x)) continue;
        throw new Error(path + "." + k + ": not a field of the proto");
      }
      same(x, b[k], path + "." + k);
    }
    return;
  }
  if (String(a) !== String(b) && !(typeof a === "number" && Number(b) === a))
    throw new Error(path + ": " + JSON.stringify(a) + " came back as " +
                    JSON.stringify(b));
}

function hex(b) { return b && b.length ? Buffer.from(b).toString("hex") : undefined; }

function value(v) {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return null;
}

function attrs(list) {
  const o = {};
  for (const a of list || []) o[a.key] = value(a.value || {});
  return o;
}

// the request as protobuf's objects: from OTLP/JSON text, or protobuf
function decode(raw, json) {
  if (!json) {
    const decoded = T.decode(raw);
    const again = Buffer.from(T.encode(decoded).finish());
    if (!again.equals(raw))
      throw new Error("the protobuf body does not encode back to its bytes " +
                      "(" + raw.length + " sent, " + again.length + " back)");
    return T.toObject(decoded, { longs: String, enums: Number });
  }
  const sent = unhex(JSON.parse(raw.toString("utf8")), "request");
  // fromObject reads the JSON mapping (64-bit integers as decimal
  // strings); verify then checks the message's every field's type
  const msg = T.fromObject(sent);
  const why = T.verify(msg);
  if (why) throw new Error(why);
  const decoded = T.decode(T.encode(msg).finish());
  const back = T.toObject(decoded, { longs: String, enums: Number });
  same(sent, back, "request");
  return back;
}

function take(raw, json) {
  const back = decode(raw, json);
  let n = 0;
  for (const rs of back.resourceSpans || []) {
    const res = attrs(rs.resource && rs.resource.attributes);
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        n++;
        line({
          traceId: hex(s.traceId), spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId), name: s.name, kind: s.kind,
          start: s.startTimeUnixNano, end: s.endTimeUnixNano,
          attributes: attrs(s.attributes),
          events: (s.events || []).map((e) => ({ name: e.name, attributes: attrs(e.attributes) })),
          links: (s.links || []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
          status: s.status ? { code: s.status.code || 0, message: s.status.message } : undefined,
          service: res["service.name"], scope: ss.scope && ss.scope.name,
        });
      }
    }
  }
  return n;
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks);
    const body = raw.toString("utf8");
    if (req.url === "/mode") {
      mode = body.trim();
      res.end("ok\n");
    } else if (req.url.startsWith("/callee")) {
      line({ callee: req.headers.traceparent || null,
             tracestate: req.headers.tracestate || null,
             co: req.url.includes("co=1"), url: req.url });
      res.end("called\n");
    } else if (req.url === "/v1/traces" && req.method === "POST") {
      if (mode === "500") {
        line({ refused: true });
        res.statusCode = 500;
        res.end("down\n");
        return;
      }
      if (mode === "slow") return;      // never answers
      const type = req.headers["content-type"];
      if (type !== "application/json" && type !== "application/x-protobuf") {
        line({ invalid: "content-type " + req.headers["content-type"] });
        res.statusCode = 415;
        res.end();
        return;
      }
      try {
        const json = type === "application/json";
        const n = take(raw, json);
        line({ batch: n, header: req.headers["x-test"] || null, type: type,
               bytes: raw.length });
        if (json) {
          res.setHeader("Content-Type", "application/json");
          res.end("{}");
        } else {            // an empty ExportTraceServiceResponse
          res.setHeader("Content-Type", "application/x-protobuf");
          res.end();
        }
      } catch (e) {
        line({ invalid: String(e.message || e) });
        res.statusCode = 400;
        res.end(String(e.message || e));
      }
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
});
server.listen(Number(port), "127.0.0.1",
              () => line({ listening: server.address().port }));
