// The README's walk-through with the typed client: register the greeter's
// `greet` and `shout` steps (examples/steps/*.json, here typed against the
// document's Step schema), start a flow towards `shout` with `name: Ada`,
// wait for it, and print the `shout` it produced.
//
//   npm run walkthrough        (after `npm ci`; clients/README.md)
//
// TARTAN_SERVER (default http://127.0.0.1:8080), TARTAN_TOKEN (when the
// server has tokens) and GREETER_ADDR (default 127.0.0.1:8081, where
// `cargo run --example greeter` listens) say where things are.

import { randomUUID } from "node:crypto";

import { connect, type StartFlow, type Step } from "./client.js";

const server = process.env["TARTAN_SERVER"] ?? "http://127.0.0.1:8080";
const greeter = process.env["GREETER_ADDR"] ?? "127.0.0.1:8081";

const greet: Step = {
  id: "greet",
  name: "Greet",
  type: "sync",
  http: { endpoint: `http://${greeter}/greet`, timeout: "5s" },
  attributes: {
    name: { role: "required", type: "string" },
    greeting: { role: "output", type: "string" },
  },
};

const shout: Step = {
  id: "shout",
  name: "Shout",
  type: "sync",
  http: { endpoint: `http://${greeter}/shout` },
  attributes: {
    greeting: { role: "required", type: "string" },
    shout: { role: "output", type: "string" },
  },
};

async function main(): Promise<void> {
  const tartan = connect(server, process.env["TARTAN_TOKEN"]);
  for (const step of [greet, shout]) {
    await tartan.registerStep(step);
    console.log(`registered ${step.id}`);
  }
  const start: StartFlow = {
    id: `hello-${randomUUID()}`,
    goals: ["shout"],
    init: { name: ["Ada"] },
  };
  const id = await tartan.startFlow(start);
  console.log(`started ${id}`);
  const status = await tartan.waitForFlow(id, "30s");
  if (status !== "completed") {
    throw new Error(`flow ${id} is ${status}, not completed`);
  }
  const state = await tartan.flow(id);
  const value = state.attributes["shout"]?.[0]?.value;
  console.log(JSON.stringify(value));
  if (value !== "HELLO, ADA!") {
    throw new Error(`shout is ${JSON.stringify(value)}, not "HELLO, ADA!"`);
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
