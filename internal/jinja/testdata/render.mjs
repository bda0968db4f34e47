// Renders chat templates with @huggingface/jinja for internal/jinja's
// differential test. stdin: a JSON array of {template, vars}; stdout: a
// JSON array of {out} or {error}, one per case.
import { Template } from "@huggingface/jinja";
import { readFileSync } from "node:fs";

const cases = JSON.parse(readFileSync(0, "utf8"));
const results = cases.map(({ template, vars }) => {
  try {
    return { out: new Template(template).render(vars) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
});
process.stdout.write(JSON.stringify(results));
