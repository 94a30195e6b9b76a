// AuthorizationPolicy evaluation (pure): policies + request or connection attributes → allowed or not, and why.
export { evaluate, evaluateConnection, selectCustom, type AuthzConnection, type AuthzDecision, type AuthzHeaderEdits, type AuthzRequest } from './evaluate.js';
export { cidrContains, parseCidr, parseIp, type Cidr } from './cidr.js';
export { headerCandidates } from './header-values.js';
export { matchValue } from './values.js';
