// asc transform: exports `kernel_<name>` and `cpu_<name>` under the ABI's names
// `wago_gpu.kernel.<name>` and `wago_gpu.cpu.<name>`. AssemblyScript exports a function only under
// its own identifier, and identifiers cannot contain dots, so a guest renames them after
// compilation (the exports' targets are unchanged; the optimiser runs afterwards).
import { Transform } from "assemblyscript/transform";

const PREFIXES = [
  ["kernel_", "wago_gpu.kernel."],
  ["cpu_", "wago_gpu.cpu."],
];

export default class WagoGpuExports extends Transform {
  afterCompile(module) {
    const binaryen = this.binaryen;
    const renames = [];
    for (let index = 0; index < module.getNumExports(); index++) {
      const info = binaryen.getExportInfo(module.getExportByIndex(index));
      if (info.kind !== binaryen.ExternalFunction) continue;
      for (const [prefix, abiPrefix] of PREFIXES) {
        if (info.name.startsWith(prefix)) renames.push([info.name, info.value, abiPrefix + info.name.slice(prefix.length)]);
      }
    }
    for (const [name, internalName, abiName] of renames) {
      module.removeExport(name);
      module.addFunctionExport(internalName, abiName);
    }
  }
}
