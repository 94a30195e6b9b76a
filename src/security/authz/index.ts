// AuthorizationPolicy evaluation (pure): policies + request attributes → allowed or not, and why.
export { evaluate, type AuthzDecision, type AuthzRequest } from './evaluate.js';
export { cidrContains, parseCidr, parseIp, type Cidr } from './cidr.js';
export { matchValue } from './values.js';
