"""The runtime: the informers and what their caches keep (transforms, Job decoding), the
writers (JobControl, the fence), expectations, specs and plans kept between passes, and the
ConfigMaps and Events. The bottom of the controller: imports none of its other packages.
"""
