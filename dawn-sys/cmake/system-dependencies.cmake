# Included at the start of Dawn's top-level project (CMAKE_PROJECT_Dawn_INCLUDE) when building Dawn
# from source without fetching its dependencies. Dawn's third_party/CMakeLists.txt skips a bundled
# dependency whose target already exists, so defining these targets from the system's packages
# (Debian: libabsl-dev, spirv-headers, spirv-tools-dev, spirv-tools-headers, libvulkan-dev,
# vulkan-utility-libraries-dev) is enough; Dawn's sources stay untouched.
find_package(absl REQUIRED)
find_package(SPIRV-Headers REQUIRED)
find_package(SPIRV-Tools REQUIRED)
find_package(SPIRV-Tools-opt REQUIRED)
find_package(VulkanHeaders REQUIRED)
find_package(VulkanUtilityLibraries REQUIRED)

# The names Dawn expects for two of them.
if(NOT TARGET SPIRV-Tools)
  add_library(SPIRV-Tools INTERFACE IMPORTED)
  target_link_libraries(SPIRV-Tools INTERFACE SPIRV-Tools-static)
endif()
if(NOT TARGET SPIRV-Headers)
  add_library(SPIRV-Headers INTERFACE IMPORTED)
  target_link_libraries(SPIRV-Headers INTERFACE SPIRV-Headers::SPIRV-Headers)
endif()
