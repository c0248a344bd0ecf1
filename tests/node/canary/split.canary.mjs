// A split canary and a shadow canary through the real openai and @anthropic-ai/sdk packages: 200
// sessions of three turns each (chat keyed by user or by its opening, Responses chains of
// previous_response_id, Messages keyed by metadata.user_id or Claude Code's session header) on a 30%
// canary. Run by handlers/edge/canary_node_test.go (TestCanaryNodeSDKs), which checks the runs after.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through go test ./handlers/edge -run TestCanaryNodeSDKs`);
  return v;
};
const base = env('SVC_EDGE_BASE');
const primary = env('SVC_CANARY_PRIMARY');
const canary = env('SVC_CANARY_MODEL');
const keys = { [env('SVC_SPLIT_SLUG')]: env('SVC_SPLIT_KEY'), [env('SVC_SHADOW_SLUG')]: env('SVC_SHADOW_KEY') };
const openai = (slug) => new OpenAI({ baseURL: `${base}/e/${slug}/v1`, apiKey: keys[slug], maxRetries: 0, timeout: 20_000 });
const anthropic = (slug, headers = {}) => new Anthropic({ baseURL: `${base}/e/${slug}`, apiKey: keys[slug], maxRetries: 0, timeout: 20_000, defaultHeaders: headers });

// session i's three turns; returns the model that answered each turn.
async function session(slug, i) {
  const arms = [];
  switch (i % 5) {
    case 0: { // chat, keyed by user
      const messages = [{ role: 'user', content: `hello ${i}` }];
      for (let turn = 0; turn < 3; turn++) {
        const c = await openai(slug).chat.completions.create({ model: 'any', user: `user-${i}`, messages });
        arms.push(c.model);
        messages.push(c.choices[0].message, { role: 'user', content: `turn ${turn}` });
      }
      break;
    }
    case 1: { // chat, keyed by its opening alone, streamed
      const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: `question ${i}` }];
      for (let turn = 0; turn < 3; turn++) {
        const stream = await openai(slug).chat.completions.create({ model: 'any', messages, stream: true });
        let model = '', text = '';
        for await (const chunk of stream) {
          model = chunk.model;
          text += chunk.choices[0]?.delta?.content ?? '';
        }
        arms.push(model);
        messages.push({ role: 'assistant', content: text }, { role: 'user', content: `go on ${turn}` });
      }
      break;
    }
    case 2: { // a Responses chain: each turn only its new input and previous_response_id
      let previous;
      for (let turn = 0; turn < 3; turn++) {
        const r = await openai(slug).responses.create({ model: 'any', input: `chain ${i} turn ${turn}`, previous_response_id: previous });
        arms.push(r.model);
        previous = r.id;
      }
      break;
    }
    case 3: { // Messages, keyed by metadata.user_id as Claude Code sends it
      const messages = [{ role: 'user', content: `claude ${i}` }];
      for (let turn = 0; turn < 3; turn++) {
        const m = await anthropic(slug).messages.create({ model: 'any', max_tokens: 64, metadata: { user_id: `user_abc_account__session_${i}` }, messages });
        arms.push(m.model);
        messages.push({ role: 'assistant', content: m.content }, { role: 'user', content: `turn ${turn}` });
      }
      break;
    }
    case 4: { // Messages with Claude Code's session header, a new body each turn
      const client = anthropic(slug, { 'X-Claude-Code-Session-Id': `cc-session-${i}` });
      for (let turn = 0; turn < 3; turn++) {
        const m = await client.messages.create({ model: 'any', max_tokens: 64, messages: [{ role: 'user', content: `unrelated ${i}.${turn}` }] });
        arms.push(m.model);
      }
      break;
    }
  }
  return arms;
}

test('200 sessions on a 30% split canary: each on one arm for all its turns, 30% +- 8% on the canary', async () => {
  const slug = env('SVC_SPLIT_SLUG');
  const results = [];
  for (let start = 0; start < 200; start += 10) {
    results.push(...await Promise.all(Array.from({ length: 10 }, (_, j) => session(slug, start + j))));
  }
  let onCanary = 0;
  results.forEach((arms, i) => {
    assert.ok(arms.every((a) => a === arms[0]), `session ${i} (kind ${i % 5}) changed arm: ${arms}`);
    assert.ok(arms[0] === primary || arms[0] === canary, `session ${i} answered by ${arms[0]}`);
    if (arms[0] === canary) onCanary++;
  });
  const share = onCanary / 200;
  console.log(`# ${onCanary} of 200 sessions on the canary`);
  assert.ok(share >= 0.22 && share <= 0.38, `${onCanary} of 200 sessions on a 30% canary`);
});

test('a shadow canary: the caller always gets the primary answer', async () => {
  const slug = env('SVC_SHADOW_SLUG');
  for (let i = 0; i < 10; i++) {
    const c = await openai(slug).chat.completions.create({ model: 'any', messages: [{ role: 'user', content: `shadowed ${i}` }] });
    assert.equal(c.model, primary);
    assert.equal(c.choices[0].message.content, `shadowed ${i}`);
    const m = await anthropic(slug).messages.create({ model: 'any', max_tokens: 64, messages: [{ role: 'user', content: `shadowed message ${i}` }] });
    assert.equal(m.model, primary);
  }
});
