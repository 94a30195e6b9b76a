// Mutual TLS from the configuration side: which inbound mode a port needs, how an outbound
// connection is originated. Pure; the data plane applies the results.
export * from './destination-tls.js';
export { destinationRuleFor, lookupNamespaces, ruleHost, type RuleMatch } from './destination-rules.js';
export * from './peer-authentication.js';
