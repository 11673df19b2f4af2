/**
 * A payment provider whose charges and refunds are spans, when tracing is
 * on: one client span per call, below the payment's gRPC call, with the
 * provider's name, the amount's currency and the outcome; never the card
 * method's details, the idempotency key or the provider's reference.
 */
import { SPAN_KIND, type Telemetry } from '../../telemetry/telemetry.js';
import type { ChargeRequest, ChargeResult, PaymentProvider, RefundRequest } from './provider.js';

export function tracedProvider(provider: PaymentProvider, telemetry: Telemetry): PaymentProvider {
  const attributes = (operation: string, currency: string) => ({
    'payment.provider': provider.name,
    'payment.operation': operation,
    'payment.currency': currency,
  });
  return {
    name: provider.name,
    defaultMethod: provider.defaultMethod,
    checkMethod: (method) => provider.checkMethod(method),
    charge: (request: ChargeRequest): Promise<ChargeResult> =>
      telemetry.inSpan(`payment provider charge`, { kind: SPAN_KIND.CLIENT, attributes: attributes('charge', request.currency) }, async (span) => {
        const result = await provider.charge(request);
        span?.setAttribute('payment.outcome', result.outcome);
        if (result.outcome === 'declined') span?.setAttribute('payment.decline_code', result.code);
        return result;
      }),
    refund: (request: RefundRequest) =>
      telemetry.inSpan(`payment provider refund`, { kind: SPAN_KIND.CLIENT, attributes: attributes('refund', request.currency) }, () =>
        provider.refund(request),
      ),
  };
}
