// A small typed wrapper over openapi-fetch for Tartan's API, the entry of
// the package tartan-client (docs/clients.md): every path, parameter, body
// and answer is typed by ./schema.ts, which clients/regen generates from
// clients/openapi.json (never edit schema.ts by hand). The helpers turn a
// problem+json answer into a thrown TartanError; `api` is the openapi-fetch
// client itself, for every other operation.

import createClient, { type Client } from "openapi-fetch";

import type { components, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

export type Step = components["schemas"]["Step"];
export type StartFlow = components["schemas"]["StartFlow"];
export type FlowState = components["schemas"]["FlowState"];
export type FlowStatus = components["schemas"]["FlowStatus"];
export type Problem = components["schemas"]["Problem"];

/** A refusal of the server: its status and problem+json body. */
export class TartanError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem | undefined,
    what: string,
  ) {
    super(`${what}: ${status} ${problem?.detail ?? "(no problem body)"}`);
    this.name = "TartanError";
  }
}

/** The client of one server; `token` when it has bearer tokens. */
export function connect(baseUrl: string, token?: string): Tartan {
  const headers: Record<string, string> = {};
  if (token) {
    headers["Authorization"] = `Bearer ${token}`;
  }
  return new Tartan(createClient<paths>({ baseUrl, headers }));
}

export class Tartan {
  constructor(readonly api: Client<paths>) {}

  /** Register a step (`registerStep`); an identical repeat is fine too. */
  async registerStep(step: Step): Promise<Step> {
    const { data, error, response } = await this.api.POST("/engine/step", { body: step });
    if (!data) {
      throw new TartanError(response.status, error, `register step ${step.id}`);
    }
    return data.step;
  }

  /** Replace a registered step's definition (`updateStep`). */
  async updateStep(step: Step): Promise<Step> {
    const { data, error, response } = await this.api.PUT("/engine/step/{id}", {
      params: { path: { id: step.id } },
      body: step,
    });
    if (!data) {
      throw new TartanError(response.status, error, `update step ${step.id}`);
    }
    return data.step;
  }

  /** Start a flow (`startFlow`); answers its id as the server sanitised it. */
  async startFlow(start: StartFlow): Promise<string> {
    const { data, error, response } = await this.api.POST("/engine/flow", { body: start });
    if (!data) {
      throw new TartanError(response.status, error, `start flow ${start.id}`);
    }
    return data.flow_id;
  }

  /** The flow's status once it is no longer active, or after `wait` (at most 60 s). */
  async waitForFlow(id: string, wait = "30s"): Promise<FlowStatus> {
    const { data, error, response } = await this.api.GET("/engine/flow/{id}/status", {
      params: { path: { id }, query: { wait } },
    });
    if (!data) {
      throw new TartanError(response.status, error, `wait for flow ${id}`);
    }
    return data.status;
  }

  /** The flow's whole state (`getFlow`). */
  async flow(id: string): Promise<FlowState> {
    const { data, error, response } = await this.api.GET("/engine/flow/{id}", {
      params: { path: { id } },
    });
    if (!data) {
      throw new TartanError(response.status, error, `get flow ${id}`);
    }
    return data;
  }
}
