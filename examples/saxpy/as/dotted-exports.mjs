// asc transform: AssemblyScript export names must be identifiers, but the ABI's kernel and runner
// exports contain dots. After compiling, every exported function named wago_gpu__<kind>__<name>
// is exported as wago_gpu.<kind>.<name> instead ("__" becomes "."); other exports stay as they are.
// asc gives a transform class `binaryen` on its prototype, so no import from assemblyscript is needed.
export default class DottedExports {
  afterCompile(module) {
    const binaryen = this.binaryen;
    const renamed = [];
    for (let i = 0; i < module.getNumExports(); i++) {
      const info = binaryen.getExportInfo(module.getExportByIndex(i));
      if (info.kind === binaryen.ExternalFunction && info.name.startsWith("wago_gpu__")) renamed.push(info);
    }
    for (const { name, value } of renamed) {
      module.removeExport(name);
      module.addFunctionExport(value, name.split("__").join("."));
    }
  }
}
