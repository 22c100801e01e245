// Vitest global setup: one server for the whole run (see harness/server.ts for the order it is
// found in); each test file then makes its own database on it.
import type { TestProject } from 'vitest/node';
import { findServer, type FoundServer } from '../../harness/server.js';

let server: FoundServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  server = await findServer({ log: (line) => console.log(`[server] ${line}`) });
  console.log(`[server] tests use ${server.description}`);
  project.provide('mysqlUrl', server.url);
}

export async function teardown(): Promise<void> {
  await server?.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    mysqlUrl: string;
  }
}
