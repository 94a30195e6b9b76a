// Moved to src/routing/ (shared by the gateway and the sidecar). This forwarder stays only while
// src/agent/resources.ts (the engine's area, changed on another branch) imports the old path;
// delete it once that import reads '../routing/index.js'.
export * from '../../routing/index.js';
