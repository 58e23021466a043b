// Conformance of `verdict serve` with the unmodified TypeSafe JavaScript SDK
// (@typesafe-ai/sdk, pinned in package-lock.json): every question helper,
// the models resource, the response helpers and every error class the SDK
// has. The Go test TestTypeSafeSDKConformance (cmd/verdict) starts the
// servers and runs this file with node's built-in test runner; the
// environment names them:
//
//   VERDICT_URL          serve with API keys and a policy (see the Go test)
//   VERDICT_API_KEY      a key of tenant "acme" (allowed everything)
//   VERDICT_LIMITED_KEY  a key of tenant "limited" (refused by the policy)
//   VERDICT_BUSY_URL     serve with --max-concurrent 1 --max-queue 0 --retry-after 1
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import {
  APIConnectionError,
  APIError,
  APITimeoutError,
  APIUserAbortError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  TypeSafeClient,
  TypeSafeError,
  UnprocessableEntityError,
  VERSION,
  choice,
  noul,
  score,
} from "@typesafe-ai/sdk";

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} must be set (run through the Go test)`);
  return v;
};
const baseURL = env("VERDICT_URL");
const apiKey = env("VERDICT_API_KEY");
const client = (opts = {}) => new TypeSafeClient({ baseURL, apiKey, logLevel: "off", ...opts });
const state = "My card was charged twice for the same order and nobody answers my emails.";
const isFloatProb = (p) => typeof p === "number" && p >= 0 && p <= 1;
const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);

test("the SDK under test is 0.6.0", () => {
  assert.equal(VERSION, "0.6.0");
});

test("noul(): every form of the helper", async () => {
  const r = await client().systemOne({
    state,
    questions: {
      bare: noul(),
      text: noul("Is this about billing?"),
      described: noul("Is it urgent?", { true: "Needs an answer today.", false: "Can wait." }),
      half: noul("Is it urgent?", { true: null }),
      structured: noul({ ask: "billing?", strict: true }),
    },
  });
  for (const k of ["bare", "text", "described", "half", "structured"]) {
    assert.equal(r.answers[k].type, "noul");
    assert.ok(isFloatProb(r.answers[k].noul), `${k}: ${r.answers[k].noul}`);
    assert.equal("confidence" in r.answers[k], false);
  }
  assert.ok(r.usage.input_tokens > 0);
  assert.equal(r.usage.output_tokens, 0);
  assert.equal(typeof r.model, "string");
});

test("choice(): labels in order, null descriptions, null instructions", async () => {
  const r = await client().systemOne({
    state: { ticket: state, channel: "email" },
    questions: {
      queue: choice("Which queue?", { billing: "Payments.", tech: null, sales: "Buying." }),
      untold: choice(null, { yes: null, no: null }),
    },
  });
  const q = r.answers.queue;
  assert.equal(q.type, "choice");
  assert.deepEqual(Object.keys(q.probabilities), ["billing", "tech", "sales"]);
  assert.ok(["billing", "tech", "sales"].includes(q.choice));
  assert.ok(Math.abs(sum(q.probabilities) - 1) < 1e-6);
  assert.ok(q.confidence >= 0 && q.confidence <= 1);
  assert.deepEqual(Object.keys(r.answers.untold.probabilities), ["yes", "no"]);
});

test("score(): legend, null levels, null instructions", async () => {
  const r = await client().systemOne({
    state,
    questions: {
      urgency: score("How urgent?", ["Not urgent.", "Urgent.", "Critical."]),
      quality: score(null, ["bad", null, "good"]),
    },
  });
  const u = r.answers.urgency;
  assert.equal(u.type, "score");
  assert.ok(u.score >= 0 && u.score <= 2);
  assert.deepEqual(u.legend, { 0: "Not urgent.", 1: "Urgent.", 2: "Critical." });
  assert.deepEqual(Object.keys(u.probabilities), ["0", "1", "2"]);
  assert.deepEqual(r.answers.quality.legend, { 0: "bad", 1: null, 2: "good" });
});

test("the helpers' own checks throw TypeSafeError before any request", () => {
  assert.throws(() => score("x", { 0: "a" }), TypeSafeError);
  assert.throws(() => choice("x", ["a", "b"]), TypeSafeError);
  assert.throws(() => client().systemOne({ state, questions: {} }), TypeSafeError);
  assert.throws(() => client().systemOne({ state, questions: { s: score("x", ["only"]) } }), TypeSafeError);
  assert.throws(() => new TypeSafeClient({ baseURL, apiKey: undefined }), (e) => e instanceof TypeSafeError || e instanceof Error);
});

test("models.list() answers the hosted shape, served model first", async () => {
  const models = await client().models.list();
  assert.ok(models.length >= 2);
  for (const m of models) {
    assert.equal(typeof m.name, "string");
    assert.equal(typeof m.description, "string");
    assert.ok(!Number.isNaN(Date.parse(m.release_date)), m.release_date);
  }
  const names = models.map((m) => m.name);
  for (const alias of ["jev-latest", "jev-preview", "default"]) assert.ok(names.includes(alias), names.join(","));
});

test("default models the SDK sends are accepted", async () => {
  for (const defaultModel of [undefined, "jev-latest", "jev-preview", "jev-1.13.0", "default"]) {
    const r = await client({ defaultModel }).systemOne({ state, questions: { q: noul("Billing?") } });
    assert.equal(r.answers.q.type, "noul");
  }
});

test("withResponse(), asResponse() and map() expose the request id", async () => {
  const req = { state, questions: { q: noul("Billing?") } };
  const { data, response, requestId } = await client().systemOne(req).withResponse();
  assert.equal(response.status, 200);
  assert.match(requestId, /^req_[0-9a-f]{24}$/);
  assert.equal(data.answers.q.type, "noul");
  const raw = await client().systemOne(req).asResponse();
  assert.equal(raw.headers.get("content-type"), "application/json");
  assert.equal(typeof (await raw.json()).answers.q.noul, "number");
  assert.equal(await client().systemOne(req).map((r) => r.answers.q.type), "noul");
});

test("AuthenticationError: wrong key (401)", async () => {
  await assert.rejects(client({ apiKey: "wrong" }).models.list(), (e) => {
    assert.ok(e instanceof AuthenticationError && e instanceof APIError);
    assert.equal(e.status, 401);
    assert.equal(e.body.detail.error_type, "authentication_error");
    assert.match(e.requestId, /^req_/);
    return true;
  });
});

test("PermissionDeniedError: the policy refuses the caller (403)", async () => {
  const c = client({ apiKey: env("VERDICT_LIMITED_KEY") });
  await assert.rejects(c.systemOne({ state, questions: { q: noul("Billing?") } }), (e) => {
    assert.ok(e instanceof PermissionDeniedError, String(e));
    assert.equal(e.status, 403);
    assert.equal(e.body.detail.error_type, "permission_error");
    return true;
  });
});

test("NotFoundError: a model not served here (404)", async () => {
  await assert.rejects(client({ defaultModel: "no-such-model" }).systemOne({ state, questions: { q: noul("x") } }), (e) => {
    assert.ok(e instanceof NotFoundError, String(e));
    assert.equal(e.body.detail.error_type, "not_found_error");
    return true;
  });
});

test("UnprocessableEntityError: every problem with its path (422)", async () => {
  const many = Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`o${i}`, null]));
  await assert.rejects(
    client().systemOne({ state, questions: { one: choice("x", { only: null }), wide: choice("y", many) } }),
    (e) => {
      assert.ok(e instanceof UnprocessableEntityError, String(e));
      assert.equal(e.body.detail.error_type, "invalid_request_error");
      const paths = e.body.fields.map((f) => f.path);
      assert.deepEqual(paths, ["questions.one.criteria", "questions.wide.criteria"]);
      assert.match(e.message, /options per choice/);
      return true;
    },
  );
});

test("BadRequestError: a body the server cannot read as JSON (400)", async () => {
  // The SDK always sends valid JSON; a fetch that cuts the body short
  // stands for a broken proxy. The SDK itself is untouched.
  const cut = (url, init) => fetch(url, { ...init, body: init.body.slice(0, 10) });
  await assert.rejects(client({ fetch: cut }).systemOne({ state, questions: { q: noul("x") } }), (e) => {
    assert.ok(e instanceof BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.body.detail.error_type, "invalid_request_error");
    return true;
  });
});

// Holds the busy server's only admission slot: headers sent, body not.
// First waits for the slot to be free: a socket held before and just
// destroyed keeps it until the server has seen that connection close, and a
// request arriving before then is shed (529), never admitted.
const holdSlot = async () => {
  const u = new URL(env("VERDICT_BUSY_URL"));
  for (let i = 0; ; i++) {
    const m = await (await fetch(`${u.origin}/metrics`)).text();
    if (/^verdict_admission_waiting 0$/m.test(m) && /^verdict_admission_in_flight 0$/m.test(m)) break;
    if (i === 500) assert.fail("the busy server's slot was never freed");
    await new Promise((r) => setTimeout(r, 10));
  }
  const sock = net.connect(Number(u.port), u.hostname);
  await new Promise((resolve, reject) => { sock.once("connect", resolve); sock.once("error", reject); });
  sock.write("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{");
  // Wait until the server counts it as admitted (waiting for its body).
  for (let i = 0; i < 500; i++) {
    const m = await (await fetch(`${u.origin}/metrics`)).text();
    if (/^verdict_admission_waiting 1$/m.test(m)) return sock;
    await new Promise((r) => setTimeout(r, 10));
  }
  sock.destroy();
  assert.fail("the held request was never admitted");
};

// Waits until the busy server sheds load (the slot is taken).
const overloaded = async (c) => {
  for (let i = 0; i < 200; i++) {
    const res = await c.systemOne({ state, questions: { q: noul("x") } }, { retry: { maxRetries: 0 } }).asResponse().catch((e) => e);
    if (res instanceof APIError && res.status === 529) return res;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail("the busy server never shed load");
};

test("InternalServerError: overload is 529 with Retry-After, which the SDK retries", async () => {
  const c = new TypeSafeClient({ baseURL: env("VERDICT_BUSY_URL"), apiKey: "any", logLevel: "off" });
  const sock = await holdSlot();
  try {
    const e = await overloaded(c);
    assert.ok(e instanceof InternalServerError);
    assert.equal(e.headers.get("retry-after"), "1");
    assert.equal(e.body.detail.error_type, "overloaded_error");
    assert.ok(!(e instanceof RateLimitError));
  } finally {
    sock.destroy();
  }
  // Overloaded again, then freed while the SDK waits Retry-After: its retry succeeds.
  const sock2 = await holdSlot();
  await overloaded(c);
  let tries = 0;
  const counting = (url, init) => { tries++; if (tries === 1) setTimeout(() => sock2.destroy(), 100); return fetch(url, init); };
  const started = Date.now();
  const r = await new TypeSafeClient({ baseURL: env("VERDICT_BUSY_URL"), apiKey: "any", logLevel: "off", fetch: counting })
    .systemOne({ state, questions: { q: noul("x") } }, { retry: { maxRetries: 3 } });
  assert.equal(r.answers.q.type, "noul");
  assert.ok(tries >= 2, `tries ${tries}`);
  assert.ok(Date.now() - started >= 900, "the SDK waited Retry-After (1 s)");
});

test("RateLimitError: verdict never answers 429; overload is not mistaken for it", async () => {
  // verdict sheds load with 529 (above), the hosted service's overload, and
  // has no per-key rate limit, so the SDK's RateLimitError cannot arise from
  // it. Check the class mapping the SDK applies to verdict's statuses.
  assert.ok(APIError.fromResponse(429, {}, new Headers()) instanceof RateLimitError);
  assert.ok(APIError.fromResponse(529, {}, new Headers()) instanceof InternalServerError);
});

test("APIConnectionError: nothing listens", async () => {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const port = srv.address().port;
  await new Promise((r) => srv.close(r));
  const c = new TypeSafeClient({ baseURL: `http://127.0.0.1:${port}`, apiKey, logLevel: "off", retry: { maxRetries: 0 } });
  await assert.rejects(c.models.list(), (e) => e instanceof APIConnectionError && !(e instanceof APITimeoutError));
});

test("APITimeoutError: the answer does not come within the timeout", async () => {
  const c = new TypeSafeClient({ baseURL: env("VERDICT_BUSY_URL"), apiKey: "any", logLevel: "off", timeout: 300, retry: { maxRetries: 0 } });
  // A request whose body is still being scored when the timeout fires: the
  // busy server's slot is free, and the SDK's fetch never finishes in 300 ms
  // because the body is held back by a slow stream.
  const slow = (url, init) => {
    const body = new ReadableStream({ start(ctl) { ctl.enqueue(new TextEncoder().encode(init.body.slice(0, 5))); } });
    return fetch(url, { ...init, body, duplex: "half" });
  };
  await assert.rejects(new TypeSafeClient({ baseURL: c.baseURL, apiKey: "any", logLevel: "off", timeout: 300, retry: { maxRetries: 0 }, fetch: slow })
    .systemOne({ state, questions: { q: noul("x") } }), (e) => {
    assert.ok(e instanceof APITimeoutError, String(e));
    assert.equal(e.timeoutMs, 300);
    return true;
  });
});

test("APIUserAbortError: the caller aborts", async () => {
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(client().systemOne({ state, questions: { q: noul("x") } }, { signal: ac.signal }), APIUserAbortError);
});
