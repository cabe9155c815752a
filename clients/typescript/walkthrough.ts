// The README's walk-through with the TypeScript client, tartan-client, as
// installed: register two steps on the greeter (`cargo run --example
// greeter`), its /greet and /shout as the README's `greet` and `shout` call
// them but under ids of their own, `client-greet-ts` and `client-shout-ts`,
// start a flow towards `client-shout-ts` with `name: Ada`, wait for it, and
// print the shout it produced, "HELLO, ADA!"; exit non-zero, saying why,
// when anything differs.
//
// Its steps and attributes are its own (the outputs `greeting_ts` and
// `shout_ts`, mapped to the greeter's `greeting` and `shout`), so that it
// neither meets the README's tour, which changes `greet`, nor the Python
// walk-through; a step of the same id registered differently (another
// greeter address) is updated.
//
// It imports "tartan-client" as installed: pack the package, install it
// into a project of its own, and compile and run this file there
// (docs/clients.md). TARTAN_SERVER (default http://127.0.0.1:8080),
// TARTAN_TOKEN (when the server has tokens) and GREETER_ADDR (default
// 127.0.0.1:8081) say where things are.

import { randomUUID } from "node:crypto";

import { connect, TartanError, type StartFlow, type Step } from "tartan-client";

const server = process.env["TARTAN_SERVER"] ?? "http://127.0.0.1:8080";
const greeter = process.env["GREETER_ADDR"] ?? "127.0.0.1:8081";

const greet: Step = {
  id: "client-greet-ts",
  name: "Greet (TypeScript client)",
  type: "sync",
  http: { endpoint: `http://${greeter}/greet`, timeout: "5s" },
  attributes: {
    name: { role: "required", type: "string" },
    greeting_ts: { role: "output", type: "string", output: { mapping: { name: "greeting" } } },
  },
};

const shout: Step = {
  id: "client-shout-ts",
  name: "Shout (TypeScript client)",
  type: "sync",
  http: { endpoint: `http://${greeter}/shout`, timeout: "5s" },
  attributes: {
    greeting_ts: { role: "required", type: "string", required: { mapping: { name: "greeting" } } },
    shout_ts: { role: "output", type: "string", output: { mapping: { name: "shout" } } },
  },
};

async function main(): Promise<void> {
  const tartan = connect(server, process.env["TARTAN_TOKEN"]);
  for (const step of [greet, shout]) {
    // Registered, or, when the id holds another definition (409), replaced
    // by this one.
    try {
      await tartan.registerStep(step);
      console.log(`${step.id}: registered`);
    } catch (e) {
      if (!(e instanceof TartanError) || e.status !== 409) {
        throw e;
      }
      await tartan.updateStep(step);
      console.log(`${step.id}: updated`);
    }
  }
  const start: StartFlow = {
    id: `client-ts-${randomUUID()}`,
    goals: ["client-shout-ts"],
    init: { name: ["Ada"] },
  };
  const id = await tartan.startFlow(start);
  console.log(`started ${id}`);
  const status = await tartan.waitForFlow(id, "30s");
  if (status !== "completed") {
    throw new Error(`flow ${id} is ${status}, not completed`);
  }
  const state = await tartan.flow(id);
  const value = state.attributes["shout_ts"]?.[0]?.value;
  console.log(JSON.stringify(value));
  if (value !== "HELLO, ADA!") {
    throw new Error(`shout_ts is ${JSON.stringify(value)}, not "HELLO, ADA!"`);
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
