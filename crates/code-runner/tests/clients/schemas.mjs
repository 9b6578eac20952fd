// Real-world request and response schemas for declarations.test.mjs, and the
// code that calls them through iii.fn in each language: nested objects,
// arrays of objects, string enums, unions (anyOf, oneOf, nullable), $refs
// into $defs and definitions (one recursive), optional and required fields,
// additionalProperties, a function without schemas, ids with `-`, a reserved
// word and nested namespaces, descriptions ending in quotes.

const address = {
  type: "object",
  required: ["street", "city", "country_code"],
  properties: {
    street: { type: "string" },
    city: { type: "string" },
    postal_code: { type: ["string", "null"] },
    country_code: { type: "string", description: 'ISO 3166-1 alpha-2, e.g. "PT"' },
  },
  additionalProperties: false,
};

const orderStatus = { type: "string", enum: ["pending", "paid", "shipped", "cancelled"] };

export const FUNCTIONS = [
  {
    function_id: "shop-api::orders::create",
    description: 'Creates an order.\nThe total is computed by the shop, in "currency"',
    request_format: {
      type: "object",
      required: ["customer", "items", "currency"],
      properties: {
        customer: {
          type: "object",
          required: ["name", "email"],
          properties: {
            name: { type: "string" },
            email: { type: "string", format: "email" },
            shipping: address,
          },
        },
        items: {
          type: "array",
          minItems: 1,
          items: {
            type: "object",
            required: ["sku", "quantity"],
            properties: {
              sku: { type: "string", pattern: "^[A-Z0-9-]+$" },
              quantity: { type: "integer", minimum: 1 },
              unit_price: { type: "number", description: "Overrides the catalogue's price */ if set." },
              options: { type: "object", properties: { gift_wrap: { type: "boolean" } } },
            },
          },
        },
        currency: { enum: ["USD", "EUR", "GBP"] },
        notes: { type: "string", description: 'Free text, e.g. "leave at the door"' },
      },
      additionalProperties: false,
    },
    response_format: {
      type: "object",
      required: ["order_id", "status", "total"],
      properties: { order_id: { type: "string" }, status: orderStatus, total: { type: "number" } },
    },
  },
  {
    function_id: "shop-api::orders::list",
    description: "Lists orders, newest first, a page at a time.",
    request_format: {
      type: "object",
      properties: {
        status: { $ref: "#/$defs/status" },
        limit: { type: "integer", minimum: 1, maximum: 100, default: 20 },
        cursor: { anyOf: [{ type: "string" }, { type: "null" }] },
      },
      $defs: { status: orderStatus },
    },
    response_format: {
      type: "object",
      required: ["orders", "next_cursor"],
      properties: {
        orders: { type: "array", items: { $ref: "#/$defs/order" } },
        next_cursor: { anyOf: [{ type: "string" }, { type: "null" }] },
      },
      $defs: {
        status: orderStatus,
        order: {
          type: "object",
          required: ["order_id", "status", "created_at"],
          properties: {
            order_id: { type: "string" },
            status: { $ref: "#/$defs/status" },
            created_at: { type: "string", format: "date-time" },
            shipping: { oneOf: [address, { type: "null" }] },
          },
        },
      },
    },
  },
  {
    function_id: "shop-api::orders::get",
    request_format: { type: "object", required: ["order_id"], properties: { order_id: { type: "string" } } },
    response_format: { $ref: "#/definitions/found", definitions: { found: { anyOf: [{ $ref: "#/definitions/order" }, { type: "null" }] }, order: { type: "object", properties: { order_id: { type: "string" }, status: orderStatus, str: { type: "string" }, list: { type: "array", items: { type: "integer" } } } } } },
  },
  {
    function_id: "docs::tree::walk",
    description: "Walks a document outline (a recursive schema).",
    request_format: {
      $ref: "#/$defs/node",
      $defs: {
        node: {
          type: "object",
          required: ["title"],
          properties: {
            title: { type: "string" },
            level: { type: "integer", enum: [1, 2, 3] },
            children: { type: "array", items: { $ref: "#/$defs/node" } },
          },
        },
      },
    },
    response_format: { type: "object", required: ["count"], properties: { count: { type: "integer" }, titles: { type: "array", items: { type: "string" } } } },
  },
  {
    function_id: "events::publish",
    description: "Publishes a UI event: a click or a key press.",
    request_format: {
      type: "object",
      required: ["event"],
      properties: {
        event: {
          oneOf: [
            { type: "object", required: ["kind", "x", "y"], properties: { kind: { const: "click" }, x: { type: "number" }, y: { type: "number" } } },
            { type: "object", required: ["kind", "key"], properties: { kind: { const: "key" }, key: { type: "string" }, shift: { type: "boolean" } } },
          ],
        },
        session: { type: ["string", "null"] },
        self: { type: "string", description: "A link to this event." },
      },
    },
    response_format: { type: "boolean" },
  },
  {
    function_id: "kv-store::put",
    description: "Stores a value with free-form metadata.",
    request_format: {
      type: "object",
      required: ["key", "value"],
      properties: {
        key: { type: "string" },
        value: {},
        metadata: { type: "object", additionalProperties: { type: "string" } },
        "ttl-seconds": { type: "integer" },
        from: { type: "string" },
        counters: { type: "object", properties: { hits: { type: "integer" } }, additionalProperties: { type: "integer" } },
      },
    },
    response_format: { type: "object", additionalProperties: true },
  },
  { function_id: "legacy::ping" },
  {
    function_id: "render-3d::scene::type",
    description: "Renders a scene; its name is a reserved word.",
    request_format: { type: "array", items: { type: "object", properties: { mesh: { type: "string" }, scale: { type: "number" } } } },
    response_format: { type: "string", enum: ["ok", "too-big"] },
  },
];

/** TypeScript calling them; the one wrong payload is marked. */
export const TS_USAGE = `
function use(...values: unknown[]): void {
  void values;
}

async function main(): Promise<void> {
  const created = await iii.fn.shop_api.orders.create({
    customer: { name: "Ada", email: "ada@example.com", shipping: { street: "R. Augusta 1", city: "Lisboa", postal_code: null, country_code: "PT" } },
    items: [{ sku: "BOOK-1", quantity: 2 }, { sku: "PEN-9", quantity: 1, unit_price: 2.5, options: { gift_wrap: true } }],
    currency: "EUR",
    notes: "leave at the door",
  });
  const id: string = created.order_id;
  const total: number = created.total;
  const status: "pending" | "paid" | "shipped" | "cancelled" = created.status;
  const page = await iii.fn.shop_api.orders.list({ status: "paid", limit: 10, cursor: null });
  const next: string | null = page.next_cursor;
  for (const order of page.orders) {
    const created_at: string = order.created_at;
    const city: string | undefined = order.shipping?.city;
    use(created_at, city, next);
  }
  await iii.fn.shop_api.orders.list();
  const found = await iii.fn.shop_api.orders.get({ order_id: id });
  use(found?.order_id, found?.list?.[0]);
  const walked = await iii.fn.docs.tree.walk({ title: "Guide", level: 1, children: [{ title: "Intro", children: [{ title: "Why" }] }] });
  const count: number = walked.count;
  const ok: boolean = await iii.fn.events.publish({ event: { kind: "click", x: 1, y: 2 }, session: null });
  await iii.fn.events.publish({ event: { kind: "key", key: "a", shift: true }, self: "/events/1" });
  const stored = await iii.fn.kv_store.put({ key: "k", value: [1, { any: "thing" }], metadata: { owner: "ada" }, "ttl-seconds": 60, from: "x", counters: { hits: 1, misses: 2 } });
  use(stored["anything"]);
  const pong: unknown = await iii.fn.legacy.ping();
  await iii.fn.legacy.ping({ whatever: 1 });
  const rendered: "ok" | "too-big" = await iii.fn.render_3d.scene.type_([{ mesh: "cube", scale: 2 }]);
  const run = await iii.fn.code_runner.run({ lang: "python", code: "result = 1" });
  use(total, status, count, ok, pong, rendered, run.exit_code);
  await iii.fn.shop_api.orders.create({
    customer: { name: "Ada", email: "ada@example.com" },
    items: [{ sku: "BOOK-1", quantity: 1 }],
    // @ts-expect-error JPY is not among the currencies
    currency: "JPY",
  });
}
main();
`;

/** Python calling them, every call correct. */
export const PY_USAGE = `from iii_api import iii

created = iii.fn.shop_api.orders.create(
    customer={"name": "Ada", "email": "ada@example.com", "shipping": {"street": "R. Augusta 1", "city": "Lisboa", "postal_code": None, "country_code": "PT"}},
    items=[{"sku": "BOOK-1", "quantity": 2}, {"sku": "PEN-9", "quantity": 1, "unit_price": 2.5, "options": {"gift_wrap": True}}],
    currency="EUR",
    notes="leave at the door",
)
order_id: str = created["order_id"]
total: float = created["total"]
page = iii.fn.shop_api.orders.list(status="paid", limit=10, cursor=None)
nxt: str | None = page["next_cursor"]
for order in page["orders"]:
    created_at: str = order["created_at"]
    shipping = order.get("shipping")
    city: str | None = shipping["city"] if shipping else None
everything = iii.fn.shop_api.orders.list()
found = iii.fn.shop_api.orders.get(order_id=order_id)
numbers: list[int] = found.get("list", []) if found else []
walked = iii.fn.docs.tree.walk(title="Guide", level=1, children=[{"title": "Intro", "children": [{"title": "Why"}]}])
count: int = walked["count"]
ok: bool = iii.fn.events.publish(event={"kind": "click", "x": 1, "y": 2}, session=None)
iii.fn.events.publish({"event": {"kind": "key", "key": "a", "shift": True}, "self": "/events/1"})
stored = iii.fn.kv_store.put({"key": "k", "value": [1, {"any": "thing"}], "metadata": {"owner": "ada"}, "ttl-seconds": 60, "from": "x", "counters": {"hits": 1}})
print(stored.get("anything"))
pong = iii.fn.legacy.ping()
iii.fn.legacy.ping({"whatever": 1})
rendered = iii.fn.render_3d.scene.type_([{"mesh": "cube", "scale": 2}])
run = iii.fn.code_runner.run(lang="python", code="result = 1")
print(total, count, ok, pong, rendered, run["exit_code"])
`;

/** Python with one wrong call: a currency not in the enum. */
export const PY_WRONG = `from iii_api import iii

iii.fn.shop_api.orders.create(
    customer={"name": "Ada", "email": "ada@example.com"},
    items=[{"sku": "BOOK-1", "quantity": 1}],
    currency="JPY",
)
`;
