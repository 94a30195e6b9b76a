// The messages of Envoy's external authorization service (`envoy.service.auth.v3.Authorization/Check`)
// that this agent sends and reads, described here (our own description, with the field numbers of
// Envoy's public API) in the JSON form protobufjs reads: only the fields used. Shared by the client
// and the tests' authorizer, so both speak exactly these messages.
import * as protoLoader from '@grpc/proto-loader';
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';

const str = (id: number) => ({ type: 'string', id });
const headerValueOption = {
  fields: {
    header: { type: 'HeaderValue', id: 1 },
    append: { type: 'BoolValue', id: 2 },
    append_action: { type: 'int32', id: 3 },
  },
};

// Typed loosely: protobufjs reads map fields (`keyType`), which its JSON interface type does not list.
const descriptor: Record<string, unknown> = {
  nested: {
    envoy: { nested: { service: { nested: { auth: { nested: { v3: { nested: {
      SocketAddress: { fields: { protocol: { type: 'int32', id: 1 }, address: str(2), port_value: { type: 'uint32', id: 3 } } },
      Address: { fields: { socket_address: { type: 'SocketAddress', id: 1 } } },
      Timestamp: { fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } } },
      Peer: { fields: { address: { type: 'Address', id: 1 }, service: str(2), principal: str(4) } },
      HttpRequest: {
        fields: {
          id: str(1), method: str(2), headers: { keyType: 'string', type: 'string', id: 3 }, path: str(4), host: str(5),
          scheme: str(6), query: str(7), fragment: str(8), size: { type: 'int64', id: 9 }, protocol: str(10),
          body: str(11), raw_body: { type: 'bytes', id: 12 },
        },
      },
      Request: { fields: { time: { type: 'Timestamp', id: 1 }, http: { type: 'HttpRequest', id: 2 } } },
      AttributeContext: {
        fields: {
          source: { type: 'Peer', id: 1 }, destination: { type: 'Peer', id: 2 }, request: { type: 'Request', id: 4 },
          context_extensions: { keyType: 'string', type: 'string', id: 10 },
        },
      },
      CheckRequest: { fields: { attributes: { type: 'AttributeContext', id: 1 } } },
      RpcStatus: { fields: { code: { type: 'int32', id: 1 }, message: str(2) } },
      BoolValue: { fields: { value: { type: 'bool', id: 1 } } },
      HeaderValue: { fields: { key: str(1), value: str(2), raw_value: { type: 'bytes', id: 3 } } },
      HeaderValueOption: headerValueOption,
      HttpStatus: { fields: { code: { type: 'int32', id: 1 } } },
      DeniedHttpResponse: {
        fields: { status: { type: 'HttpStatus', id: 1 }, headers: { rule: 'repeated', type: 'HeaderValueOption', id: 2 }, body: str(3) },
      },
      OkHttpResponse: {
        fields: {
          headers: { rule: 'repeated', type: 'HeaderValueOption', id: 2 },
          headers_to_remove: { rule: 'repeated', type: 'string', id: 5 },
          response_headers_to_add: { rule: 'repeated', type: 'HeaderValueOption', id: 6 },
        },
      },
      CheckResponse: {
        fields: { status: { type: 'RpcStatus', id: 1 }, denied_response: { type: 'DeniedHttpResponse', id: 2 }, ok_response: { type: 'OkHttpResponse', id: 3 } },
      },
      Authorization: { methods: { Check: { requestType: 'CheckRequest', responseType: 'CheckResponse' } } },
    } } } } } } } },
  },
};

export const AUTHORIZATION_SERVICE = 'envoy.service.auth.v3.Authorization';
export const CHECK_PATH = `/${AUTHORIZATION_SERVICE}/Check`;

export interface WirePeer {
  address?: { socket_address?: { address?: string; port_value?: number } };
  principal?: string;
}

export interface WireCheckRequest {
  attributes?: {
    source?: WirePeer;
    destination?: WirePeer;
    request?: {
      time?: { seconds?: string | number; nanos?: number };
      http?: {
        id?: string; method?: string; headers?: Record<string, string>; path?: string; host?: string; scheme?: string;
        query?: string; fragment?: string; size?: string | number; protocol?: string; body?: string; raw_body?: Buffer;
      };
    };
    context_extensions?: Record<string, string>;
  };
}

export interface WireHeaderValueOption {
  header?: { key?: string; value?: string; raw_value?: Buffer };
  append?: { value?: boolean } | null;
  append_action?: number;
}

export interface WireCheckResponse {
  status?: { code?: number; message?: string } | null;
  denied_response?: { status?: { code?: number } | null; headers?: WireHeaderValueOption[]; body?: string } | null;
  ok_response?: { headers?: WireHeaderValueOption[]; headers_to_remove?: string[]; response_headers_to_add?: WireHeaderValueOption[] } | null;
}

const packageDefinition = protoLoader.fromJSON(descriptor as Parameters<typeof protoLoader.fromJSON>[0], { keepCase: true, longs: String, enums: Number, defaults: false });

/** The service definition, for grpc-js clients (serialize/deserialize) and the tests' server. */
export const authorizationService = packageDefinition[AUTHORIZATION_SERVICE] as unknown as ServiceDefinition;
export const checkMethod = authorizationService['Check'] as MethodDefinition<WireCheckRequest, WireCheckResponse>;
