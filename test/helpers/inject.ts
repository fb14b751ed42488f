/** Plugin calls through inject(), exactly as Docker makes them: POST, the plugin Accept header, no Content-Type. */
import type { FastifyInstance } from 'fastify';

export interface DockerAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly contentType: string | undefined;
}

export function dockerCaller(app: FastifyInstance): (method: string, body?: unknown) => Promise<DockerAnswer> {
  return async (method, body) => {
    const res = await app.inject({
      method: 'POST',
      url: `/${method}`,
      headers: { accept: 'application/vnd.docker.plugins.v1.2+json' },
      ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const type = res.headers['content-type'];
    return { status: res.statusCode, body: res.json<Record<string, unknown>>(), contentType: typeof type === 'string' ? type : undefined };
  };
}
