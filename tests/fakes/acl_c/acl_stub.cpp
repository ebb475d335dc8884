// A fake of CANN's libascendcl for the exported C++ runner (tests/test_export.py): the
// ACL functions runner/main.cpp calls, over host memory, with the header's signatures.
// "Device" memory is malloc'd; aclmdlExecute hands the input buffers and the selected
// gear to fake_acl_exec.py (FAKE_ACL_EXEC: the command), which runs the .air inside the
// fake .om on the host device and writes the outputs back. Strict where the real one is:
// calls before aclInit / aclrtSetDevice, a gear model executed without
// aclmdlSetInputDynamicDims, dataset sizes unlike the model's, a buffer too small.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "acl/acl.h"

struct aclDataBuffer {
    void *data;
    size_t size;
};
struct aclmdlDataset {
    std::vector<aclDataBuffer *> buffers;
};
struct aclmdlDesc {
    std::vector<size_t> inputs, outputs;
    long gear_index = -1;
};

namespace {
bool g_init = false, g_device = false;
std::string g_model, g_work;
std::vector<int64_t> g_dims;
bool g_dims_set = false;
aclmdlDesc g_desc;

int Fail(const char *what) {
    std::fprintf(stderr, "fake acl: %s\n", what);
    return ACL_ERROR_INVALID_PARAM;
}

std::string Exec(const std::string &args) {
    const char *cmd = std::getenv("FAKE_ACL_EXEC");
    if (cmd == nullptr) return "";
    std::string line = std::string(cmd) + " " + args;
    return std::system(line.c_str()) == 0 ? "ok" : "";
}
}  // namespace

extern "C" {
aclError aclInit(const char *) { g_init = true; return ACL_SUCCESS; }
aclError aclFinalize() { g_init = false; return ACL_SUCCESS; }
aclError aclrtSetDevice(int32_t) {
    if (!g_init) return Fail("aclrtSetDevice before aclInit");
    g_device = true;
    return ACL_SUCCESS;
}
aclError aclrtResetDevice(int32_t) { g_device = false; return ACL_SUCCESS; }
aclError aclrtCreateContext(aclrtContext *context, int32_t) {
    static int ctx;
    *context = &ctx;
    return g_device ? ACL_SUCCESS : Fail("aclrtCreateContext before aclrtSetDevice");
}
aclError aclrtDestroyContext(aclrtContext) { return ACL_SUCCESS; }
aclError aclrtMalloc(void **ptr, size_t size, aclrtMemMallocPolicy) {
    if (!g_device) return Fail("aclrtMalloc before aclrtSetDevice");
    if (size == 0) return Fail("aclrtMalloc of 0 bytes");
    *ptr = std::calloc(size, 1);
    return ACL_SUCCESS;
}
aclError aclrtFree(void *ptr) { std::free(ptr); return ACL_SUCCESS; }
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind) {
    if (count > destMax) return Fail("aclrtMemcpy: count > destMax");
    std::memcpy(dst, src, count);
    return ACL_SUCCESS;
}
aclDataBuffer *aclCreateDataBuffer(void *data, size_t size) {
    return new aclDataBuffer{data, size};
}
aclError aclDestroyDataBuffer(const aclDataBuffer *buf) { delete buf; return ACL_SUCCESS; }
aclError aclmdlLoadFromFile(const char *path, uint32_t *model_id) {
    if (!g_device) return Fail("aclmdlLoadFromFile before aclrtSetDevice");
    g_model = path;
    char tmpl[] = "/tmp/fake_acl_XXXXXX";
    g_work = mkdtemp(tmpl);
    if (Exec("describe '" + g_model + "' '" + g_work + "'").empty()) return Fail("bad model");
    std::ifstream in(g_work + "/desc.txt");
    size_t n = 0, size = 0;
    g_desc = aclmdlDesc();
    in >> n >> g_desc.gear_index;
    for (size_t i = 0; i < n && in >> size; ++i) g_desc.inputs.push_back(size);
    in >> n;
    for (size_t i = 0; i < n && in >> size; ++i) g_desc.outputs.push_back(size);
    *model_id = 1;
    return ACL_SUCCESS;
}
aclError aclmdlUnload(uint32_t) { return ACL_SUCCESS; }
aclmdlDesc *aclmdlCreateDesc() { return new aclmdlDesc(); }
aclError aclmdlDestroyDesc(aclmdlDesc *desc) { delete desc; return ACL_SUCCESS; }
aclError aclmdlGetDesc(aclmdlDesc *desc, uint32_t model_id) {
    if (model_id != 1) return Fail("aclmdlGetDesc: unknown model");
    *desc = g_desc;
    return ACL_SUCCESS;
}
size_t aclmdlGetNumInputs(aclmdlDesc *desc) { return desc->inputs.size(); }
size_t aclmdlGetNumOutputs(aclmdlDesc *desc) { return desc->outputs.size(); }
size_t aclmdlGetInputSizeByIndex(aclmdlDesc *desc, size_t i) { return desc->inputs.at(i); }
size_t aclmdlGetOutputSizeByIndex(aclmdlDesc *desc, size_t i) { return desc->outputs.at(i); }
aclError aclmdlGetInputIndexByName(const aclmdlDesc *desc, const char *name, size_t *index) {
    if (std::strcmp(name, ACL_DYNAMIC_TENSOR_NAME) != 0 || desc->gear_index < 0) {
        return Fail("aclmdlGetInputIndexByName: no such input");
    }
    *index = static_cast<size_t>(desc->gear_index);
    return ACL_SUCCESS;
}
aclmdlDataset *aclmdlCreateDataset() { return new aclmdlDataset(); }
aclError aclmdlDestroyDataset(const aclmdlDataset *ds) { delete ds; return ACL_SUCCESS; }
aclError aclmdlAddDatasetBuffer(aclmdlDataset *ds, aclDataBuffer *buf) {
    ds->buffers.push_back(buf);
    return ACL_SUCCESS;
}
size_t aclmdlGetDatasetNumBuffers(const aclmdlDataset *ds) { return ds->buffers.size(); }
aclDataBuffer *aclmdlGetDatasetBuffer(const aclmdlDataset *ds, size_t i) {
    return ds->buffers.at(i);
}
aclError aclmdlSetInputDynamicDims(uint32_t, aclmdlDataset *ds, size_t index,
                                   const aclmdlIODims *dims) {
    if (static_cast<long>(index) != g_desc.gear_index || index >= ds->buffers.size()) {
        return Fail("aclmdlSetInputDynamicDims: not the ascend_mbatch_shape_data input");
    }
    g_dims.assign(dims->dims, dims->dims + dims->dimCount);
    g_dims_set = true;
    return ACL_SUCCESS;
}
aclError aclmdlExecute(uint32_t, const aclmdlDataset *input, aclmdlDataset *output) {
    if (input->buffers.size() != g_desc.inputs.size() ||
        output->buffers.size() != g_desc.outputs.size()) {
        return Fail("aclmdlExecute: dataset sizes unlike the model's");
    }
    if (g_desc.gear_index >= 0 && !g_dims_set) return Fail("gear model run without dims");
    for (size_t i = 0; i < input->buffers.size(); ++i) {
        if (static_cast<long>(i) == g_desc.gear_index) continue;
        std::ofstream out(g_work + "/in" + std::to_string(i) + ".bin", std::ios::binary);
        out.write(static_cast<const char *>(input->buffers[i]->data),
                  static_cast<std::streamsize>(input->buffers[i]->size));
    }
    std::ofstream dims(g_work + "/dims.txt");
    for (int64_t d : g_dims) dims << d << " ";
    dims.close();
    if (Exec("run '" + g_model + "' '" + g_work + "'").empty()) return Fail("execute failed");
    for (size_t i = 0; i < output->buffers.size(); ++i) {
        std::ifstream in(g_work + "/out" + std::to_string(i) + ".bin", std::ios::binary);
        std::stringstream bytes;
        bytes << in.rdbuf();
        const std::string data = bytes.str();
        if (data.size() > output->buffers[i]->size) return Fail("output buffer too small");
        std::memcpy(output->buffers[i]->data, data.data(), data.size());
    }
    return ACL_SUCCESS;
}
}
