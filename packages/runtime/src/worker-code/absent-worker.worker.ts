/**
 * Stand-ins for Workers a deployment binds to but does not contain (a service binding's `service`,
 * a Durable Object binding's `script_name`). `wrangler dev` starts such a project and shows the
 * binding "not connected"; celld starts it too, and a call through the binding fails at once with
 * an error that names the missing Worker, which the calling Worker can catch: a fetch() is answered
 * 503 with the reason as its body, an RPC method call throws it. Never a hang.
 *
 * Worker-side code: it imports nothing from Node and typechecks against @cloudflare/workers-types
 * (packages/runtime/tsconfig.worker.json). The host generates only the exports that pass the
 * parameters (host/absent-workers.ts).
 */
import { DurableObject, WorkerEntrypoint } from "cloudflare:workers";

/** What a service binding's props carry (the host sets them per binding). */
interface AbsentServiceProps {
  worker: string;
  binding: string;
}

const statusUnavailable = 503;

// The stand-ins read nothing from their env.
type Env = Record<string, never>;

/**
 * `target`, except that every property it does not have is a method that throws `reason`: an RPC
 * call to any name fails with the reason instead of workerd's "does not implement the method".
 */
function failingEveryCall<T extends object>(target: T, reason: string): T {
  return new Proxy(target, {
    get(on, property, receiver) {
      if (property === "fetch") return async () => new Response(reason, { status: statusUnavailable });
      if (typeof property === "string" && !(property in on)) {
        return () => {
          throw new Error(reason);
        };
      }
      return Reflect.get(on, property, receiver);
    },
  });
}

export function absentServiceReason(worker: string, binding: string): string {
  return (
    `env.${binding} is bound to the Worker "${worker}", which is not part of this celld deployment; ` +
    `add its config with another -c to run it`
  );
}

/** The entrypoint every absent service binding points at, told which one by its props. */
export class AbsentService extends WorkerEntrypoint {
  constructor(ctx: ExecutionContext, env: Env) {
    super(ctx, env);
    const props = (ctx as ExecutionContext & { props: AbsentServiceProps }).props;
    // A constructor that returns an object makes it the instance: workerd then finds every
    // method, fetch included, through the proxy.
    return failingEveryCall(this, absentServiceReason(props.worker, props.binding));
  }
}

/** A Durable Object class standing for `className` of the absent Worker `worker`. */
export function absentDurableObject(className: string, worker: string, binding: string): new (ctx: DurableObjectState, env: Env) => DurableObject {
  const reason =
    `env.${binding} is bound to the Durable Object class "${className}" of the Worker "${worker}", which is not ` +
    `part of this celld deployment; add its config with another -c to run it`;
  return class Absent extends DurableObject {
    constructor(ctx: DurableObjectState, env: Env) {
      super(ctx, env);
      return failingEveryCall(this, reason);
    }
  };
}

export default {
  fetch(): Response {
    return new Response("celld's stand-in for Workers that are not part of the deployment", { status: statusUnavailable });
  },
} satisfies ExportedHandler;
