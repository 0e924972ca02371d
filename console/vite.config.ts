// SPDX-License-Identifier: Apache-2.0
// The console's build (docs/console.md): a static app under /console/, written to
// $WARREN_CONSOLE_OUT (the Makefile's build/console) with hashed asset names. The SDK is compiled
// from its sources (sdk/typescript/src), so the console always speaks the tree's own API.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Plugin, defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

// The SDK imports node:http (unix sockets), node:fs and node:path (tar and Compose contexts) on
// use only. In the browser each is a module whose import fails saying so.
function nodeUnavailable(): Plugin {
  const prefix = '\0node-unavailable:';
  return {
    name: 'warren-node-unavailable',
    enforce: 'pre',
    resolveId(id) { return id.startsWith('node:') ? prefix + id : null; },
    load(id) {
      if (!id.startsWith(prefix)) return null;
      return `throw new Error(${JSON.stringify(id.slice(prefix.length) + ' is not available in a browser')});\n`;
    },
  };
}

export default defineConfig({
  plugins: [nodeUnavailable()],
  base: '/console/',
  root: here,
  publicDir: path.join(here, 'public'),
  resolve: {
    alias: { '@warren/sdk': path.join(here, '../sdk/typescript/src/index.cts') },
  },
  // The SDK's sources are .cts files: TypeScript like the rest.
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact', include: /\.(m?ts|cts|[jt]sx)$/ },
  build: {
    outDir: process.env.WARREN_CONSOLE_OUT || path.join(here, '../build/console'),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    chunkSizeWarningLimit: 800,
    reportCompressedSize: false,
  },
});
