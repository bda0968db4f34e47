// Runs Anthropic's official TypeScript SDK against llamaserve's Messages
// API and prints what each case saw as one JSON object, for the Go test
// (cmd/llamaserve TestAnthropicSDK) to check: node run.mjs with
// LLAMASERVE_URL and LLAMASERVE_KEY set.
import Anthropic from '@anthropic-ai/sdk';
import { VERSION } from '@anthropic-ai/sdk/version';

const baseURL = process.env.LLAMASERVE_URL;
const key = process.env.LLAMASERVE_KEY;
const client = new Anthropic({ baseURL, apiKey: key, maxRetries: 0, timeout: 120_000 });

const weather = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
    required: ['city'],
  },
};
const time = {
  name: 'get_time',
  description: 'The time in a zone',
  input_schema: { type: 'object', properties: { utc: { type: 'boolean' } }, required: ['utc'] },
};
const hello = [{ role: 'user', content: 'Hello' }];

// What a failed call says: the SDK's error class, status and body.
function failure(e) {
  return { class: e?.constructor?.name, status: e?.status, body: e?.error, message: String(e?.message) };
}

const cases = {
  // create: a whole message, with a system prompt given as blocks.
  async create() {
    const msg = await client.messages.create({
      model: 'demo',
      max_tokens: 12,
      temperature: 0,
      system: [{ type: 'text', text: 'Be brief.' }],
      messages: hello,
    });
    const count = await client.messages.countTokens({
      model: 'demo',
      system: [{ type: 'text', text: 'Be brief.' }],
      messages: hello,
    });
    return { msg, count };
  },

  // stream: the SDK's MessageStream (its text events and the message it
  // gathers), then the raw events of create with stream: true, and the
  // same request whole.
  async stream() {
    const params = { model: 'demo', max_tokens: 12, temperature: 0, messages: hello };
    const stream = client.messages.stream(params);
    let text = '';
    stream.on('text', (t) => (text += t));
    const final = await stream.finalMessage();
    const events = [];
    for await (const ev of await client.messages.create({ ...params, stream: true })) {
      events.push(ev.type + (ev.type.startsWith('content_block') ? ':' + ev.index : ''));
    }
    const whole = await client.messages.create(params);
    return { text, final, events, whole };
  },

  // tools: a forced tool_use (tool_choice tool), then its tool_result
  // sent back with tool_choice none.
  async tools() {
    const first = await client.messages.create({
      model: 'demo',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [weather, time],
      tool_choice: { type: 'tool', name: 'get_weather' },
    });
    const use = first.content.find((b) => b.type === 'tool_use');
    // Greedy: sampled at Anthropic's default temperature 1, the demo model
    // may end at once, and the reply would have no text block.
    const second = await client.messages.create({
      model: 'demo',
      max_tokens: 8,
      temperature: 0,
      messages: [
        { role: 'user', content: 'What is the weather in Paris?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use?.id, content: '18 C, sunny' }] },
      ],
      tools: [weather, time],
      tool_choice: { type: 'none' },
    });
    return { first, second };
  },

  // forced: tool_choice any, streamed: the call's input gathered by the
  // SDK from its input_json_delta events.
  async forced() {
    const stream = client.messages.stream({
      model: 'demo',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'What time is it?' }],
      tools: [time],
      tool_choice: { type: 'any' },
    });
    let json = '';
    stream.on('inputJson', (delta) => (json += delta));
    const final = await stream.finalMessage();
    return { final, json };
  },

  // errors: a missing max_tokens, an unknown field, an image block, a
  // server tool: 400s in Anthropic's shape.
  async errors() {
    const out = {};
    const tries = {
      missing_max_tokens: { model: 'demo', messages: hello },
      unknown_field: { model: 'demo', max_tokens: 4, messages: hello, frobnicate: true },
      image: {
        model: 'demo',
        max_tokens: 4,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'http://x/y.png' } }] }],
      },
      server_tool: {
        model: 'demo',
        max_tokens: 4,
        messages: hello,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      },
    };
    for (const [name, params] of Object.entries(tries)) {
      try {
        await client.messages.create(params);
        out[name] = { class: 'none' };
      } catch (e) {
        out[name] = failure(e);
      }
    }
    return out;
  },

  // auth: a wrong key is 401 in Anthropic's shape; the key as a Bearer
  // token (authToken) works as x-api-key does.
  async auth() {
    const out = {};
    try {
      await new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 }).messages.create({
        model: 'demo',
        max_tokens: 4,
        messages: hello,
      });
      out.wrong = { class: 'none' };
    } catch (e) {
      out.wrong = failure(e);
    }
    const bearer = new Anthropic({ baseURL, apiKey: null, authToken: key, maxRetries: 0 });
    out.bearer = await bearer.messages.create({ model: 'demo', max_tokens: 4, messages: hello });
    return out;
  },
};

// thinking: a model that thinks (a second server, with Qwen 3's template;
// the grammar extension makes the demo model write its thinking and
// answer): the SDK's thinking events and the thinking block it gathers.
const thinkingURL = process.env.LLAMASERVE_THINKING_URL;
if (thinkingURL) {
  cases.thinking = async () => {
    const thinker = new Anthropic({ baseURL: thinkingURL, apiKey: key, maxRetries: 0 });
    const params = {
      model: 'demo',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Weather?' }],
      thinking: { type: 'enabled', budget_tokens: 1024 },
      grammar: process.env.LLAMASERVE_THINKING_GRAMMAR,
    };
    const stream = thinker.messages.stream(params);
    let thinking = '';
    let text = '';
    stream.on('thinking', (delta) => (thinking += delta));
    stream.on('text', (delta) => (text += delta));
    const final = await stream.finalMessage();
    const whole = await thinker.messages.create(params);
    return { final, whole, thinking, text };
  };
}

const results = { sdk: VERSION, node: process.version };
for (const [name, run] of Object.entries(cases)) {
  try {
    results[name] = { ok: true, data: await run() };
  } catch (e) {
    results[name] = { ok: false, error: failure(e) };
  }
}
process.stdout.write(JSON.stringify(results) + '\n');
