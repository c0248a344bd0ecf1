// Feedback through the real SDKs (docs/API.md, "Feedback"): an app sends POST {endpoint}/v1/feedback with
// the id the SDK returned for a chat completion (plain and streamed), a message or a response; all are
// run ids, but for a response an upstream that serves the Responses API passed through, whose id is the
// upstream's. Run by handlers/edge/node_test.go, which then checks that the runs keep the scores.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};
const base = env('SVC_EDGE_BASE');
const slug = env('SVC_KEY_SLUG');
const openai = new OpenAI({ baseURL: `${base}/e/${slug}/v1`, apiKey: env('SVC_KEY'), maxRetries: 0, timeout: 20_000 });
const anthropic = new Anthropic({ baseURL: `${base}/e/${slug}`, apiKey: env('SVC_KEY'), maxRetries: 0 });

// feedback posts through the openai client itself, as an app holding one would.
const feedback = (id, score, comment) => openai.post('/feedback', { body: { id, score, comment } });

test('feedback with the ids the SDKs returned, for chat, Messages and Responses', async () => {
  const chat = await openai.chat.completions.create({ messages: [{ role: 'user', content: 'rate me' }] });
  assert.match(chat.id, /^chatcmpl-/);
  const stream = await openai.chat.completions.create({ messages: [{ role: 'user', content: 'rate me too' }], stream: true });
  const streamIDs = new Set();
  for await (const chunk of stream) streamIDs.add(chunk.id);
  assert.equal(streamIDs.size, 1, 'every chunk carries the one id');
  const [streamID] = streamIDs;
  const msg = await anthropic.messages.create({ model: 'any', max_tokens: 32, messages: [{ role: 'user', content: 'rate me' }] });
  assert.match(msg.id, /^msg_/);
  const resp = await openai.responses.create({ model: 'any', input: 'rate me' });
  assert.match(resp.id, /^resp_/);

  // The same tail: each id names its run (run_<tail>).
  for (const [id, score, surface] of [[chat.id, 1, 'chat'], [streamID, -1, 'chat-stream'], [msg.id, 0, 'messages'], [resp.id, 1, 'responses']]) {
    const res = await feedback(id, score, `node ${surface}`);
    assert.equal(res.object, 'feedback');
    assert.equal(res.id, id);
    assert.equal(res.score, score);
  }
});

test('feedback on an id of another endpoint, or of no run, is the same 404', async () => {
  const up = new OpenAI({ baseURL: `${base}/e/${env('SVC_UP_SLUG')}/v1`, apiKey: env('SVC_UP_KEY'), maxRetries: 0 });
  const theirs = await up.chat.completions.create({ messages: [{ role: 'user', content: 'not yours' }] });
  const messages = [];
  for (const id of [theirs.id, 'chatcmpl-0000000000000nothere', 'msg_nothing']) {
    await assert.rejects(feedback(id, 1), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal(err.code, 'not_found');
      messages.push(err.message);
      return true;
    });
  }
  assert.equal(new Set(messages).size, 1, messages.join(' | '));
  await assert.rejects(feedback(theirs.id, 7), (err) => err instanceof OpenAI.BadRequestError && err.param === 'score');
});

test('a comment past 2,000 characters is a 400 naming comment; a body past 64 KiB a 413', async () => {
  const chat = await openai.chat.completions.create({ messages: [{ role: 'user', content: 'comment on me' }] });
  await feedback(chat.id, 1, 'é'.repeat(2000)); // the longest comment, two bytes a character
  await assert.rejects(feedback(chat.id, 1, 'é'.repeat(2001)), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.param, 'comment');
    assert.match(err.message, /at most 2000 characters/);
    return true;
  });
  await assert.rejects(feedback(chat.id, 1, 'x'.repeat(64 << 10)), (err) => {
    assert.equal(err.status, 413, String(err));
    assert.equal(err.code, 'body_too_large');
    assert.equal(err.param, 'comment');
    return true;
  });
});

test('feedback takes a request from the key\'s limit, and past it is the SDK\'s RateLimitError', async () => {
  const limited = new OpenAI({ baseURL: `${base}/e/${env('SVC_FB_LIMITED_SLUG')}/v1`, apiKey: env('SVC_FB_LIMITED_KEY'), maxRetries: 0 });
  const post = (id, score) => limited.post('/feedback', { body: { id, score } }).withResponse();
  const chat = await limited.chat.completions.create({ messages: [{ role: 'user', content: 'limit me' }] }); // 1 of 2
  const { data, response } = await post(chat.id, 1); // 2 of 2
  assert.equal(data.score, 1);
  assert.equal(response.headers.get('x-ratelimit-limit-requests'), '2');
  assert.equal(response.headers.get('x-ratelimit-remaining-requests'), '0');
  await assert.rejects(post(chat.id, -1), (err) => {
    assert.ok(err instanceof OpenAI.RateLimitError, String(err));
    assert.equal(err.code, 'rate_limit_exceeded');
    assert.equal(err.type, 'rate_limit_error');
    assert.ok(Number(err.headers.get('retry-after')) > 0, String(err.headers.get('retry-after')));
    assert.equal(err.headers.get('x-ratelimit-remaining-requests'), '0');
    return true;
  });
  // The limit is the key's, whatever the route: its next call is refused too.
  await assert.rejects(limited.chat.completions.create({ messages: [{ role: 'user', content: 'again' }] }), (err) => err instanceof OpenAI.RateLimitError);
});

// An upstream that serves the Responses API itself (supportsResponses) is passed the call through, and
// the caller gets the upstream's response id, not one made of the run id; feedback on it must still
// find the run (its upstreamResponseId). Each answer is scored at once, as an app would, before its run
// is written. The comments name the id, so that the Go driver can check through the API that each score
// landed on the run that keeps that id.
test('feedback on passed-through Responses ids, fresh and continued, plain and streamed', async () => {
  const pass = new OpenAI({ baseURL: `${base}/e/${env('SVC_PASS_SLUG')}/v1`, apiKey: env('SVC_PASS_KEY'), maxRetries: 0, timeout: 20_000 });
  const streamed = async (body) => {
    const stream = await pass.responses.create({ ...body, stream: true });
    const ids = new Set();
    let completed;
    for await (const ev of stream) {
      if (ev.response) ids.add(ev.response.id);
      if (ev.type === 'response.completed') completed = ev.response;
    }
    assert.equal(ids.size, 1, `every event names the one response: ${[...ids]}`);
    assert.ok(completed, 'the stream completed');
    return completed;
  };
  const scored = async (res, kind, score) => {
    // The mock upstream names its responses resp_mock<N>: the id is the upstream's, passed through.
    assert.match(res.id, /^resp_mock\d+$/, `${kind}: ${res.id}`);
    const out = await pass.post('/feedback', { body: { id: res.id, score, comment: `node pass ${kind} ${res.id}` } });
    assert.deepEqual(out, { object: 'feedback', id: res.id, score, comment: `node pass ${kind} ${res.id}` });
  };

  const fresh = await pass.responses.create({ model: 'any', input: 'rate the upstream' });
  await scored(fresh, 'fresh', 1);
  const next = await pass.responses.create({ model: 'any', input: 'and again', previous_response_id: fresh.id });
  assert.notEqual(next.id, fresh.id);
  await scored(next, 'followup', -1);

  const freshStream = await streamed({ model: 'any', input: 'rate the streamed upstream' });
  await scored(freshStream, 'fresh-stream', 0);
  const nextStream = await streamed({ model: 'any', input: 'and again, streamed', previous_response_id: freshStream.id });
  await scored(nextStream, 'followup-stream', -1);
  // A second score replaces the first.
  await scored(nextStream, 'followup-stream', 1);

  // Another endpoint's key cannot score them: the one 404.
  const other = new OpenAI({ baseURL: `${base}/e/${env('SVC_UP_SLUG')}/v1`, apiKey: env('SVC_UP_KEY'), maxRetries: 0 });
  await assert.rejects(other.post('/feedback', { body: { id: fresh.id, score: -1 } }), (err) => err instanceof OpenAI.NotFoundError && err.code === 'not_found');
});
