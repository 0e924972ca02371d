// SPDX-License-Identifier: Apache-2.0
// Named volumes (/v1/volumes) and API keys (/v1/keys).

import { type ConnectionOptions, call, resolveClient, seg } from './client.cjs';
import { type ApiKey, type VolumeInfo, apiKeyFromJson, arr, obj, volumeFromJson } from './models.cjs';

/** The team's volumes: directories that outlive sandboxes (`Sandbox.create({volumes:
 * ['cache:/cache']})`). */
export class Volume {
  private constructor() {}
  /** Make an empty volume (ConflictError if the team has one of that name). */
  static async create(name: string, opts: ConnectionOptions = {}): Promise<VolumeInfo> {
    return volumeFromJson((await resolveClient(opts).request('POST', '/v1/volumes', { ...call(opts), json: { name } })).object());
  }
  static async list(opts: ConnectionOptions = {}): Promise<VolumeInfo[]> {
    const d = (await resolveClient(opts).request('GET', '/v1/volumes', call(opts))).object();
    return arr(d.volumes).map((v) => volumeFromJson(obj(v)));
  }
  /** The volume with `diskBytes` (NotFoundError if none). */
  static async get(name: string, opts: ConnectionOptions = {}): Promise<VolumeInfo> {
    return volumeFromJson((await resolveClient(opts).request('GET', `/v1/volumes/${seg(name)}`, call(opts))).object());
  }
  /** Delete the volume and its files (ConflictError while a sandbox mounts it). */
  static async delete(name: string, opts: ConnectionOptions = {}): Promise<void> {
    await resolveClient(opts).request('DELETE', `/v1/volumes/${seg(name)}`, call(opts));
  }
}

/** API keys (an admin key, or the unix socket, makes them). */
export const admin = {
  /** Make a key for `team` (made if new); `key` is the secret, shown this once. */
  async createKey(team: string, opts: ConnectionOptions & { name?: string; admin?: boolean } = {}): Promise<ApiKey> {
    const json: Record<string, unknown> = { team, admin: !!opts.admin };
    if (opts.name !== undefined) json.name = opts.name;
    return apiKeyFromJson((await resolveClient(opts).request('POST', '/v1/keys', { ...call(opts), json, retry: false })).object());
  },
  async listKeys(opts: ConnectionOptions = {}): Promise<ApiKey[]> {
    const d = (await resolveClient(opts).request('GET', '/v1/keys', call(opts))).object();
    return arr(d.keys).map((k) => apiKeyFromJson(obj(k)));
  },
  async deleteKey(keyId: string, opts: ConnectionOptions = {}): Promise<void> {
    await resolveClient(opts).request('DELETE', `/v1/keys/${seg(keyId)}`, call(opts));
  },
};
