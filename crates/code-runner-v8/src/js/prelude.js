// What every bootstrap file shares: the two ways it touches objects without
// going through a prototype a guest can reach. Runs first, while the
// snapshot is made, before any guest code exists.
const PreludeDefineProperty = Object.defineProperty;
const PreludeGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const PreludeSetPrototypeOf = Object.setPrototypeOf;

/** An own property's descriptor with no prototype: reading its absent `get` or `value` never reaches a getter a guest put on Object.prototype. */
const ownDescriptor = (object, key) => {
  const desc = PreludeGetOwnPropertyDescriptor(object, key);
  if (desc !== undefined) PreludeSetPrototypeOf(desc, null);
  return desc;
};

/** Appends without [[Set]]: an index setter a guest put on Array.prototype is never called. */
const append = (list, value) => {
  PreludeDefineProperty(list, list.length, { __proto__: null, value, writable: true, enumerable: true, configurable: true });
};
