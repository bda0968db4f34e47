// Runs Ollama's JavaScript client (the ollama npm package) against a
// llamaserve: node client.mjs URL KEY THINKING_URL (a server whose model
// thinks, without a key). It prints one JSON object, each case's result by
// name, for internal/serve's TestOllamaJSClient to check.
import { Ollama } from 'ollama'

const [url, key, thinkingURL] = process.argv.slice(2)
const client = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } })
const out = {}

// run records what f returns, or the error the client throws.
async function run(name, f) {
  try {
    out[name] = await f()
  } catch (e) {
    out[name] = { error: e.error ?? String(e), status_code: e.status_code ?? 0 }
  }
}

const user = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }]
const greedy = { temperature: 0, num_predict: 6 }
const tools = [{ type: 'function', function: { name: 'w', parameters: { type: 'object', properties: { c: { type: 'string' } } } } }]
const callSchema = {
  type: 'object',
  properties: {
    name: { const: 'w' },
    arguments: { type: 'object', properties: { c: { const: 'P' } }, required: ['c'], additionalProperties: false },
  },
  required: ['name', 'arguments'],
  additionalProperties: false,
}

await run('version', () => client.version())
await run('list', () => client.list())
await run('ps', () => client.ps())
await run('show', () => client.show({ model: 'demo' }))
await run('chat', () => client.chat({ model: 'demo', messages: user, options: greedy }))
await run('chat_stream', async () => {
  const parts = []
  for await (const part of await client.chat({ model: 'demo', messages: user, options: greedy, stream: true })) {
    parts.push(part)
  }
  return parts
})
await run('generate_stream', async () => {
  const parts = []
  for await (const part of await client.generate({ model: 'demo', system: 'S', prompt: 'Once upon', options: { temperature: 0, num_predict: 5 }, stream: true })) {
    parts.push(part)
  }
  return parts
})
await run('generate_raw', () => client.generate({ model: 'demo', prompt: 'Once upon', raw: true, options: { temperature: 0, num_predict: 5 } }))
await run('embed', () => client.embed({ model: 'demo', input: ['Hello world', 'a'] }))
await run('format_schema', () => client.chat({
  model: 'demo', messages: [{ role: 'user', content: 'A city?' }], options: { seed: 1, num_predict: 200 },
  format: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['city', 'n'], additionalProperties: false },
}))
await run('tool_call', () => client.chat({
  model: 'demo', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, format: callSchema, options: { seed: 1, num_predict: 150 },
}))
await run('tool_call_stream', async () => {
  const parts = []
  for await (const part of await client.chat({
    model: 'demo', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, format: callSchema, options: { seed: 1, num_predict: 150 }, stream: true,
  })) {
    parts.push(part)
  }
  return parts
})
await run('tool_result', () => client.chat({
  model: 'demo', tools, options: { temperature: 0, num_predict: 3 },
  messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'w', arguments: { c: 'P' } } }] },
    { role: 'tool', tool_name: 'w', content: '{"t": 21}' },
  ],
}))
await run('error_model', () => client.chat({ model: 'other', messages: user }))
await run('error_think', () => client.chat({ model: 'demo', messages: user, think: true }))
await run('error_images', () => client.chat({ model: 'demo', messages: [{ role: 'user', content: 'Hi', images: ['aGk='] }] }))
await run('error_stream', async () => {
  for await (const part of await client.chat({ model: 'demo', messages: user, options: { top_k: -3 }, stream: true })) {
    return part
  }
})
await run('no_key', () => new Ollama({ host: url }).list())
const thinker = new Ollama({ host: thinkingURL })
await run('think', () => thinker.chat({ model: 'demo', messages: [{ role: 'user', content: 'The capital?' }], think: true }))
await run('think_stream', async () => {
  const parts = []
  for await (const part of await thinker.chat({ model: 'demo', messages: [{ role: 'user', content: 'The capital?' }], think: true, stream: true })) {
    parts.push(part)
  }
  return parts
})

console.log(JSON.stringify(out))
